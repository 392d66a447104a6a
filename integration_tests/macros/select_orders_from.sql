{#- The order rows of a generic-test fixture, with the VCMT columns the tests
    read. Every fixture starts from seed `orders_rows`; a corrupted one adds
    its own rows of seed `orders_corruptions`, so what it corrupts stays in its
    model. -#}
{% macro select_orders_from(seed) %}
select
    tenant_id,
    order_id,
    _version,
    sign,
    status,
    amount
from {{ ref(seed) }}
{%- endmacro %}
