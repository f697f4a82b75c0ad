"""What every resource kind shares, knowing none: names, errors, filters, pages, LROs, routes, CLI."""
