"""The ranking maths: fusing tier hit lists, placing documents, choosing each document's passages,
and the query-time tier options (parent-child window, section BM25, feedback) that wrap tiers."""
