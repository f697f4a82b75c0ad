"""Local code on its way to gs://: which files ship and their content hash (`sources`), and the object store
they are uploaded to (`store`). Shared by `trainworks submit` and `custom-jobs create --local-package-path`,
so it sits below both."""
