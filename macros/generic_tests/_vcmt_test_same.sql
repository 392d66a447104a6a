{#- SQL that is true when two values are the same. NULL equals NULL, and NULL
    against a value is a difference: a plain `=` yields NULL for both, which
    makes the tests' `where not (...)` drop the row and hide the difference.
    With a tolerance, numbers may differ by
    tolerance * max(1, |a|, |b|): absolute near zero, relative for large values,
    because sums of floats depend on the order rows are added in. -#}
{% macro _vcmt_test_same(a, b, tolerance=none) %}
  {%- set exact = "coalesce(" ~ a ~ " = " ~ b ~ ", " ~ a ~ " is null and " ~ b ~ " is null)" -%}
  {%- if tolerance is none or tolerance == 0 -%}
    {{ return(exact) }}
  {%- endif -%}
  {%- set fa = "toFloat64(" ~ a ~ ")" -%}
  {%- set fb = "toFloat64(" ~ b ~ ")" -%}
  {{ return("(" ~ exact ~ " or coalesce(abs(" ~ fa ~ " - " ~ fb ~ ") <= " ~ tolerance
            ~ " * greatest(1, abs(" ~ fa ~ "), abs(" ~ fb ~ ")), false))") }}
{% endmacro %}
