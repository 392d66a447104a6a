def test_table_model_builds_on_chdb(project):
    project.model("t1", "{{ config(materialized='table', order_by='id') }} select 1 as id")
    project.dbt("run")
    assert project.scalar("select count() from t1") == 1
