"""What the three job kinds (custom, tuning, training pipelines) share: states, rows, service steps."""
