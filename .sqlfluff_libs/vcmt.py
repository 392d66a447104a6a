"""What sqlfluff's jinja templater renders for the `vcmt.` package macros used in models.

sqlfluff lints models without a database, so these return representative SQL
(the incremental branch of a model, a local lake path) instead of running the
real macros in macros/.
"""


def lake_source(dataset, format="Parquet"):
    return f"file('.local/lake/staged/{dataset}/**/*.{format.lower()}', '{format}')"


def is_incremental():
    return True


def watermark(default=None):
    return "0"


def current_rows(relation, where=None):
    return f"(select * from {relation} final where sign = 1)"


def changes(relation):
    return f"(select * except (_vcmt_row) from {relation}__changes where _vcmt_load > 0)"
