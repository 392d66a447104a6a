{#- The key, version and sign columns a vcmt test works on: test arguments
    first, then the tested model's config (what vcmt_upsert reads), then the
    package defaults (`vcmt._config_defaults`); the key is read as
    vcmt_upsert reads it. The key has no default: a test that needs it cannot
    guess it, so a missing key stops compilation with a message that names the
    test and the argument. -#}
{% macro _vcmt_test_args(test_name, model, unique_key=none, version=none, sign=none, require_key=true) %}
  {%- set node_config = vcmt._vcmt_test_model_config(model) -%}
  {%- set unique_key = unique_key if unique_key is not none else node_config.get('unique_key') -%}
  {%- set defaults = vcmt._config_defaults() -%}
  {%- set version = version if version is not none else node_config.get('version') or defaults.version -%}
  {%- set sign = sign if sign is not none else node_config.get('sign') or defaults.sign -%}
  {%- set keys = vcmt._column_names(unique_key, 'vcmt.' ~ test_name, 'unique_key') -%}
  {%- if require_key and not keys -%}
    {%- set tested = model if model is string else model.identifier -%}
    {{ exceptions.raise_compiler_error(
      "vcmt." ~ test_name ~ ": argument `unique_key` is required for " ~ tested ~ ": pass "
      ~ "`unique_key` (a column or a list of columns) to the test, or set `unique_key` in the "
      ~ "model's config; got `" ~ unique_key ~ "`.") }}
  {%- endif -%}
  {%- for name, value in [('version', version), ('sign', sign)] -%}
    {%- if value is not string or value | trim == '' -%}
      {{ exceptions.raise_compiler_error(
        "vcmt." ~ test_name ~ ": argument `" ~ name ~ "` must be a column name; got `" ~ value ~ "`.") }}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'unique_key': keys, 'version': version | trim, 'sign': sign | trim}) }}
{% endmacro %}
