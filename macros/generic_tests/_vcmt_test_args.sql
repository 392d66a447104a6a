{#- The key, version and sign columns a vcmt test works on: test arguments
    first, then the tested model's config (what vcmt_upsert reads), read and
    checked by the materialization's own reader (`vcmt._identity_columns`),
    defaults included. The key has no default: a test that needs it cannot
    guess it, so a missing key stops compilation with a message that names the
    test and the argument. -#}
{% macro _vcmt_test_args(test_name, model, unique_key=none, version=none, sign=none, require_key=true) %}
  {%- set node_config = vcmt._vcmt_test_model_config(model) -%}
  {%- set source = {} -%}
  {%- for opt, arg in [('unique_key', unique_key), ('version', version), ('sign', sign)] -%}
    {%- do source.update({opt: arg if arg is not none else node_config.get(opt)}) -%}
  {%- endfor -%}
  {%- set ids = vcmt._identity_columns(source, 'vcmt.' ~ test_name) -%}
  {%- if require_key and not ids.key_columns -%}
    {%- set tested = model if model is string else model.identifier -%}
    {{ exceptions.raise_compiler_error(
      "vcmt." ~ test_name ~ ": argument `unique_key` is required for " ~ tested ~ ": pass "
      ~ "`unique_key` (a column or a list of columns) to the test, or set `unique_key` in the "
      ~ "model's config; got `" ~ source.unique_key ~ "`.") }}
  {%- endif -%}
  {{ return({'unique_key': ids.key_columns, 'version': ids.version, 'sign': ids.sign}) }}
{% endmacro %}
