"""The costs report (an extension): machine-hours and approximate cost by job or persistent resource."""
