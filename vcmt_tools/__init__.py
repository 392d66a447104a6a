"""The Python half of the vcmt package: what users import and run.

- `vcmt_tools.staging`: Python staging models of Debezium topics (Spark);
- `vcmt_tools.stage_writer`: the external writer, `vcmt-load-stage`;
- `vcmt_tools.dbt_invoke`: runs one dbt command in this process and keeps its log.
"""
