"""The capacity preflight (a Trainworks extension): quota and free machines of a project in a location."""
