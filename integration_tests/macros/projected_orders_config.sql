{#- Config of the projection fixtures: the same two projections and the same
    status change written after the build (see write_status_change), then a
    merge. The fixtures differ only in `deduplicate_merge_projection_mode`,
    i.e. in whether that merge rebuilds the projections or leaves them stale. -#}
{% macro projected_orders_config(deduplicate_merge_projection_mode) %}
  {{ config(
      projections=[
          {'name': 'by_status', 'query': 'select status, sum(sign), sum(amount * sign) group by status'},
          {'name': 'by_tenant', 'query': 'select tenant_id, sum(sign) as orders, sum(amount * sign) as total group by tenant_id'},
      ],
      settings={'deduplicate_merge_projection_mode': deduplicate_merge_projection_mode},
      post_hook=[
          "{{ write_status_change(this) }}",
          "optimize table {{ this }} final",
      ],
  ) }}
{% endmacro %}
