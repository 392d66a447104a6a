{#- The one place a lifecycle statement is sent (docs/design.md#observe-plan-apply).

    The lifecycle's planners (plans.sql) return the statements a step of a
    run needs, in order, as data, and run nothing; this executor sends them.
    For each it logs the step's line, checks the lock's fence first where
    the statement is DDL on the model's objects (lock.sql `_check_fence`:
    DDL takes no WHERE), names the statement after its step so the fault
    harness and the logs can point at it, and keeps it in the run's record
    (`cfg._run.steps`). No other macro under lifecycle/ sends a statement
    (tests/lifecycle keeps it so). -#}


{#- A statement of a plan: its `name` (dbt's statement name, and the step the
    fault harness pauses at), its `sql`, the line it logs first (`log`, at
    info level unless `info` is false), and whether the lock's fence is
    checked right before it (`fence`). -#}
{% macro _step(name, sql, log=none, fence=true, info=true) %}
  {{ return({'name': name, 'sql': sql, 'log': log, 'fence': fence, 'info': info}) }}
{% endmacro %}


{#- Send `steps` in order for the model `objs` belongs to (its lock's fence is
    `objs.target`'s). A statement that fails stops the run: what the steps
    before it did stays done, and each plan is written so that the next run
    finds a state it knows (lifecycle.sql). -#}
{% macro _apply(cfg, objs, steps) %}
  {%- set record = vcmt._run_state(cfg).setdefault('steps', []) -%}
  {%- for step in steps -%}
    {%- do vcmt._renew_lock(cfg, objs) -%}
    {%- if step.log -%}{{ log(step.log, info=step.info) }}{%- endif -%}
    {%- if step.fence -%}{%- do vcmt._check_fence(objs.target) -%}{%- endif -%}
    {%- call statement(step.name) -%}{{ step.sql }}{%- endcall -%}
    {%- do record.append(step.name) -%}
  {%- endfor -%}
{% endmacro %}
