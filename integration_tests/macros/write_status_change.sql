{#- Post-hook of the projection fixtures: one status change written the way
    vcmt_upsert writes it (cancel + new state), as a second part that the next
    merge collapses. Order 2/1 is the only `returned` order, so the change
    empties that group; a projection that is not rebuilt on merge keeps it. -#}
{% macro write_status_change(relation) %}
insert into {{ relation }} (tenant_id, order_id, _version, sign, status, amount)
values (2, 1, 5, -1, 'returned', 0.30), (2, 1, 6, 1, 'closed', 0.30)
{% endmacro %}
