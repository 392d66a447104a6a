{#- The one-line run report of a load (docs/design.md#run-report): printed by
    `dbt run` and by `vcmt.load_stage`, and kept in the run result. -#}
{% macro _summary(stats) %}
  {%- set n = stats -%}
  {{ return(
      n.events ~ ' events (' ~ n.upserts ~ ' upserts, ' ~ n.deletes ~ ' deletes); '
      ~ n.superseded ~ ' superseded in batch; ' ~ n.fed ~ ' applied in ' ~ n.rounds ~ ' round(s)'
      ~ (' on ' ~ n.virtual_shards ~ ' virtual shards' if n.virtual_shards > 1 else '') ~ ': '
      ~ n.inserted ~ ' inserted, ' ~ n.updated ~ ' updated, ' ~ n.deleted ~ ' deleted, '
      ~ n.skipped ~ ' skipped as stale or duplicate; ' ~ n.rows_written ~ ' rows written'
      ~ ('; ' ~ n.truncates ~ ' truncate(s): ' ~ n.truncated_rows ~ ' rows at or below version ' ~ n.truncated_to ~ ' deleted' if n.truncated_to is not none else '')
      ~ ('; ' ~ n.truncates ~ ' truncate(s) already applied' if n.truncates > 0 and n.truncated_to is none else '')
      ~ ('; ' ~ n.ignored_below_truncate ~ ' events at or below a truncate ignored' if n.ignored_below_truncate > 0 else '')) }}
{% endmacro %}
