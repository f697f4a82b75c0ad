"""Background reconcilers: they bring the world in line with what the database says."""
