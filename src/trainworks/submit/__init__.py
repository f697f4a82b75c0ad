"""The submitter: turns a run configuration into a Vertex-style CustomJob, stages the code and submits it."""
