"""The ranking maths: fusion, the shipped recipe, and the query-time tier options."""
