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


def cdc_lake_root():
    return ".local/lake"


def cdc_staging_config(partition_by):
    return ""


def cdc_new_batches_filter(relation):
    return "_batch_id not in (0, 1)"


def cdc_valid_changes(typed, columns):
    return (
        f"select {', '.join(columns)}, _version, cast(case when op = 'd' then -1 else 1 end as tinyint) as sign,"
        f" op as _op, source_ts as _source_ts, _batch_id from {typed} where reason is null and _batch_id not in (0, 1)"
    )


def cdc_typed_lines(envelopes, topic, key, columns):
    fields = ", ".join(
        f"try_variant_get(image, '$.{name}', 'string') as {name}__text,"
        f" try_variant_get(image, '$.{name}', '{'bigint' if type_ == 'timestamp_millis' else type_}') as {name}__value"
        for name, type_ in columns.items()
    )
    typed = ", ".join(
        f"timestamp_millis({name}__value) as {name}" if type_ == "timestamp_millis" else f"{name}__value as {name}"
        for name, type_ in columns.items()
    )
    null_key = " or ".join(f"{column}__text is null" for column in key)
    return (
        f"with lines as (select * from {envelopes} where topic = '{topic}'),"
        f" fields as (select *, {fields} from lines)"
        f" select topic, raw_payload, source_file, _batch_id, op, {typed}, lsn as _version, source_ts,"
        f" case when is_bad_json then 'bad_json' when {null_key} then 'null_key' end as reason"
        " from fields"
    )
