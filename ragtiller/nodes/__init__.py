"""One module per node; each ``make_*`` binds a node to its components."""
