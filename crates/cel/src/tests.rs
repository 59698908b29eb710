//! Cases of upstream's dynamic-resource-allocation/cel compile_test.go and of the apiserver CEL
//! library tests (quantity_test.go, semverlib_test.go, cel-go's strings extension) that apply
//! to device selectors: inputs and expected results or messages, whole.

use super::*;
use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use rstest::rstest;

const DRIVER: &str = "dra.example.com";

fn bool_attr(b: bool) -> DeviceAttribute {
    DeviceAttribute {
        bool: Some(b),
        ..Default::default()
    }
}

fn int_attr(i: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(i),
        ..Default::default()
    }
}

fn string_attr(s: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(s.to_string()),
        ..Default::default()
    }
}

fn version_attr(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        version: Some(v.to_string()),
        ..Default::default()
    }
}

fn device(attributes: &[(&str, DeviceAttribute)], capacity: &[(&str, &str)]) -> Device {
    Device {
        name: "device-0".to_string(),
        attributes: Some(
            attributes
                .iter()
                .map(|(name, a)| (name.to_string(), a.clone()))
                .collect(),
        ),
        capacity: Some(
            capacity
                .iter()
                .map(|(name, q)| {
                    (
                        name.to_string(),
                        DeviceCapacity {
                            value: K8sQuantity(q.to_string()),
                            ..Default::default()
                        },
                    )
                })
                .collect(),
        ),
        ..Default::default()
    }
}

fn no_device() -> Device {
    device(&[], &[])
}

fn multiple_allocations(allow: Option<bool>) -> Device {
    Device {
        allow_multiple_allocations: allow,
        ..no_device()
    }
}

const ALL: &str = r#"
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
"#;

fn all_device() -> Device {
    device(
        &[
            ("bool", bool_attr(true)),
            ("int", int_attr(1)),
            ("string", string_attr("fish")),
            ("version", version_attr("1.0.0")),
        ],
        &[("quantity", "1Mi")],
    )
}

#[rstest]
#[case::true_literal("true", DRIVER, no_device(), Ok(true))]
#[case::false_literal("false", DRIVER, no_device(), Ok(false))]
#[case::runtime_error_lookup_identifier(
    r#"device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))"#,
    DRIVER,
    no_device(),
    Err(EvalError::NoSuchKey("noSuchAttr".to_string()))
)]
#[case::runtime_error_lookup_map(
    r#"device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))"#,
    DRIVER,
    no_device(),
    Err(EvalError::NoSuchKey("noSuchAttr".to_string()))
)]
#[case::domain_check_negative(
    r#""no-such-domain" in device.attributes"#,
    DRIVER,
    no_device(),
    Ok(false)
)]
#[case::domain_check_positive(
    r#""dra.example.com" in device.attributes"#,
    DRIVER,
    device(&[("dra.example.com/something", bool_attr(true))], &[]),
    Ok(true)
)]
#[case::empty_driver_name(r#"device.driver == """#, "", no_device(), Ok(true))]
#[case::real_driver_name(r#"device.driver == "dra.example.com""#, DRIVER, no_device(), Ok(true))]
#[case::driver_name_qualifier(
    r#"device.attributes["dra.example.com"].name"#,
    DRIVER,
    device(&[("name", bool_attr(true))], &[]),
    Ok(true)
)]
#[case::driver_name_qualifier_map_lookup(
    r#"device.attributes["dra.example.com"]["name"]"#,
    DRIVER,
    device(&[("name", bool_attr(true))], &[]),
    Ok(true)
)]
#[case::bind(
    r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#,
    DRIVER,
    device(&[("name", bool_attr(true))], &[]),
    Ok(true)
)]
#[case::qualified_attribute_name(
    r#"device.attributes["other.example.com"].name"#,
    DRIVER,
    device(&[("other.example.com/name", bool_attr(true))], &[]),
    Ok(true)
)]
#[case::qualified_name_is_not_in_the_driver_domain(
    r#"device.attributes["dra.example.com"].name"#,
    DRIVER,
    device(&[("other.example.com/name", bool_attr(true))], &[]),
    Err(EvalError::NoSuchKey("name".to_string()))
)]
#[case::bool(
    r#"device.attributes["dra.example.com"].name"#,
    DRIVER,
    device(&[("name", bool_attr(true))], &[]),
    Ok(true)
)]
#[case::int(
    r#"device.attributes["dra.example.com"].name > 0"#,
    DRIVER,
    device(&[("name", int_attr(1))], &[]),
    Ok(true)
)]
#[case::string(
    r#"device.attributes["dra.example.com"].name == "fish""#,
    DRIVER,
    device(&[("name", string_attr("fish"))], &[]),
    Ok(true)
)]
#[case::macro_exists_on_int(
    r#"device.attributes["dra.example.com"].name.exists(x, x > 0)"#,
    DRIVER,
    device(&[("name", int_attr(1))], &[]),
    Err(EvalError::Runtime("got 'int', expected iterable type".to_string()))
)]
#[case::non_bool_result_is_an_error(
    r#"device.attributes["dra.example.com"].name"#,
    DRIVER,
    device(&[("name", int_attr(1))], &[]),
    Err(EvalError::NotBool("int".to_string()))
)]
#[case::version(
    r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))"#,
    DRIVER,
    device(&[("name", version_attr("1.0.0"))], &[]),
    Ok(true)
)]
#[case::version_v(
    r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)"#,
    DRIVER,
    device(&[("name", version_attr("1.0.0"))], &[]),
    Ok(true)
)]
#[case::invalid_version_attribute(
    "true",
    DRIVER,
    device(&[("name", version_attr("1.0"))], &[]),
    Err(EvalError::Attribute {
        name: "name".to_string(),
        reason: "parse semantic version: No Major.Minor.Patch elements found".to_string(),
    })
)]
#[case::attribute_without_value(
    "true",
    DRIVER,
    device(&[("name", DeviceAttribute::default())], &[]),
    Err(EvalError::Attribute {
        name: "name".to_string(),
        reason: "unsupported attribute value".to_string(),
    })
)]
#[case::quantity(
    r#"device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
    DRIVER,
    device(&[], &[("name", "1Mi")]),
    Ok(true)
)]
#[case::check_positive(
    r#""name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
    DRIVER,
    device(&[], &[("name", "1Mi")]),
    Ok(true)
)]
#[case::check_negative(
    r#"!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
    DRIVER,
    no_device(),
    Ok(true)
)]
#[case::all(ALL, DRIVER, all_device(), Ok(true))]
#[case::many(
    r#"device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c"#,
    DRIVER,
    device(&[("a", bool_attr(true)), ("b", bool_attr(true)), ("c", bool_attr(true))], &[]),
    Ok(true)
)]
#[case::check_attribute_domains(
    r#"device.attributes.exists_one(x, x == "dra.example.com")"#,
    DRIVER,
    device(&[("services", string_attr("some_example_value"))], &[]),
    Ok(true)
)]
#[case::check_attribute_ids(
    r#"device.attributes["dra.example.com"].exists_one(x, x == "services")"#,
    DRIVER,
    device(&[("services", string_attr("some_example_value"))], &[]),
    Ok(true)
)]
#[case::split_attribute(
    r#"device.attributes["dra.example.com"].services.split("example").size() >= 2"#,
    DRIVER,
    device(&[("services", string_attr("some_example_value"))], &[]),
    Ok(true)
)]
#[case::regexp_attribute(
    r#"device.attributes["dra.example.com"].services.matches("[^a]?sym")"#,
    DRIVER,
    device(&[("services", string_attr("asymetric"))], &[]),
    Ok(true)
)]
#[case::check_capacity_domains(
    r#"device.capacity.exists_one(x, x == "dra.example.com")"#,
    DRIVER,
    device(&[], &[("memory", "1Mi")]),
    Ok(true)
)]
#[case::check_capacity_ids(
    r#"device.capacity["dra.example.com"].exists_one(x, x == "memory")"#,
    DRIVER,
    device(&[], &[("memory", "1Mi")]),
    Ok(true)
)]
#[case::has_present(
    r#"has(device.attributes["dra.example.com"].model)"#,
    DRIVER,
    device(&[("model", string_attr("a100"))], &[]),
    Ok(true)
)]
#[case::has_absent(
    r#"has(device.attributes["dra.example.com"].model)"#,
    DRIVER,
    no_device(),
    Ok(false)
)]
#[case::find_on_an_attribute(
    r#"int(device.attributes["dra.example.com"].name.find('[0-9]+')) >= 80"#,
    DRIVER,
    device(&[("name", string_attr("a100-80gb"))], &[]),
    Ok(true)
)]
#[case::optional_field_present(
    r#"device.attributes["dra.example.com"].?model.orValue("") == "a100""#,
    DRIVER,
    device(&[("model", string_attr("a100"))], &[]),
    Ok(true)
)]
#[case::optional_field_absent(
    r#"device.attributes["dra.example.com"].?model.orValue("none") == "none""#,
    DRIVER,
    no_device(),
    Ok(true)
)]
#[case::attribute_domains_equal_themselves(
    "device.attributes == device.attributes && device.capacity != device.attributes",
    DRIVER,
    device(&[("model", string_attr("a100"))], &[("memory", "1Gi")]),
    Ok(true)
)]
#[case::heterogeneous_equality_is_false(
    r#"device.attributes["dra.example.com"].model == 1"#,
    DRIVER,
    device(&[("model", string_attr("a100"))], &[]),
    Ok(false)
)]
#[case::allow_multiple_allocations(
    "device.allowMultipleAllocations == true",
    DRIVER,
    multiple_allocations(Some(true)),
    Ok(true)
)]
#[case::allow_multiple_allocations_default(
    "device.allowMultipleAllocations == false",
    DRIVER,
    multiple_allocations(None),
    Ok(true)
)]
#[case::allow_multiple_allocations_false(
    "device.allowMultipleAllocations == false",
    DRIVER,
    multiple_allocations(Some(false)),
    Ok(true)
)]
fn matches_as_upstream(
    #[case] expression: &str,
    #[case] driver: &str,
    #[case] device: Device,
    #[case] want: Result<bool, EvalError>,
) {
    let got = DeviceSelector::compile(expression).map(|s| s.matches(driver, &device));
    assert_eq!(got, Ok(want));
}

fn syntax_error() -> String {
    let expecting = "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
    format!(
        "ERROR: <input>:1:1: Syntax error: extraneous input '?' {expecting}\n| ?!\n| ^\n\
         ERROR: <input>:1:3: Syntax error: extraneous input '<EOF>' {expecting}\n| ?!\n| ..^"
    )
}

const EXPENSIVE: &str = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))";

#[rstest]
#[case::syntax_error("?!", CompileError::Invalid(syntax_error()))]
#[case::type_error("1", CompileError::ResultType("int".to_string()))]
#[case::string_result("device.driver", CompileError::ResultType("string".to_string()))]
#[case::list_result("[1, 2]", CompileError::ResultType("list(int)".to_string()))]
#[case::is_sorted_result("[1].isSorted() ? 1 : 2", CompileError::ResultType("int".to_string()))]
#[case::sets_result(
    "[sets.contains([1], [1]), sets.intersects([1], [1])]",
    CompileError::ResultType("list(bool)".to_string())
)]
#[case::list_max_result("[1, 2].max()", CompileError::ResultType("int".to_string()))]
#[case::find_result("'a'.find('a')", CompileError::ResultType("string".to_string()))]
#[case::find_all_result("'a'.findAll('a')", CompileError::ResultType("list(string)".to_string()))]
#[case::quantity_result(
    r#"quantity("1")"#,
    CompileError::ResultType("kubernetes.Quantity".to_string())
)]
#[case::comprehension_list_result(
    "[1].map(x, x)",
    CompileError::ResultType("list(int)".to_string())
)]
#[case::undeclared_variable(
    "foo == 1",
    CompileError::Invalid(
        "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"
            .to_string()
    )
)]
#[case::has_undefined_device_field(
    "has(device.foo)",
    CompileError::Invalid(
        "ERROR: <input>:1:4: undefined field 'foo'\n | has(device.foo)\n | ...^".to_string()
    )
)]
#[case::is_quantity_no_overload(
    "isQuantity([1, 2, 3])",
    CompileError::Invalid(
        "ERROR: <input>:1:11: found no matching overload for 'isQuantity' applied to '(list(int))'\n | isQuantity([1, 2, 3])\n | ..........^"
            .to_string()
    )
)]
#[case::is_semver_no_overload(
    "isSemver([1, 2, 3])",
    CompileError::Invalid(
        "ERROR: <input>:1:9: found no matching overload for 'isSemver' applied to '(list(int))'\n | isSemver([1, 2, 3])\n | ........^"
            .to_string()
    )
)]
#[case::undefined_device_field(
    "device.foo",
    CompileError::Invalid(
        "ERROR: <input>:1:7: undefined field 'foo'\n | device.foo\n | ......^".to_string()
    )
)]
#[case::undeclared_function(
    "url('x')",
    CompileError::Invalid(
        "ERROR: <input>:1:4: undeclared reference to 'url' (in container '')\n | url('x')\n | ...^"
            .to_string()
    )
)]
#[case::bind_needs_an_identifier(
    "cel.bind(1, 2, 3)",
    CompileError::Invalid(
        "ERROR: <input>:1:10: cel.bind() variable names must be simple identifiers\n| cel.bind(1, 2, 3)\n| .........^"
            .to_string()
    )
)]
#[case::too_long(
    &format!("true{}", " ".repeat(CEL_SELECTOR_EXPRESSION_MAX_LENGTH - 3)),
    CompileError::TooLong { max: CEL_SELECTOR_EXPRESSION_MAX_LENGTH }
)]
#[case::expensive(EXPENSIVE, CompileError::CostLimit { estimated: 86_666_661 })]
fn compile_refuses_as_upstream(#[case] expression: &str, #[case] want: CompileError) {
    assert_eq!(DeviceSelector::compile(expression).map(|_| ()), Err(want));
}

#[rstest]
#[case::at_the_length_limit(&format!("true{}", " ".repeat(CEL_SELECTOR_EXPRESSION_MAX_LENGTH - 4)))]
#[case::unknown_type_is_accepted(r#"device.attributes["dra.example.com"].name"#)]
#[case::type_identifier("type(1) == int")]
#[case::library_call_with_unknown_argument_type(
    r#"isSemver(device.attributes["dra.example.com"].version)"#
)]
#[case::has_on_an_attribute(r#"has(device.attributes["dra.example.com"].model)"#)]
#[case::namespaced_function(r#"strings.quote("a") == "\"a\"""#)]
#[case::comprehension_variables_are_declared("[1, 2].exists(x, x == 2)")]
#[case::nested_comprehensions_within_the_limit(
    "[1, 2, 3].all(x, [1, 2, 3].all(y, [1, 2, 3].all(z, x + y + z > 0)))"
)]
fn compile_accepts(#[case] expression: &str) {
    assert_eq!(DeviceSelector::compile(expression).map(|_| ()), Ok(()));
}

#[test]
fn messages_are_upstreams() {
    assert_eq!(
        [
            CompileError::TooLong { max: 10240 }.to_string(),
            CompileError::Invalid("x".to_string()).to_string(),
            CompileError::ResultType("int".to_string()).to_string(),
            CompileError::CostLimit { estimated: 2 }.to_string(),
            EvalError::NoSuchKey("a".to_string()).to_string(),
            EvalError::NotBool("int".to_string()).to_string(),
        ],
        [
            "may not be more than 10240 bytes",
            "compilation failed: x",
            "must evaluate to bool or the unknown type, not int",
            "too complex, exceeds cost limit",
            "no such key: a",
            "CEL result of type int could not be converted to bool",
        ]
    );
}

/// Evaluates a library expression, which the cases write as a bool.
fn eval(expression: &str) -> Result<bool, String> {
    DeviceSelector::compile(expression)
        .map_err(|e| e.to_string())?
        .matches(DRIVER, &no_device())
        .map_err(|e| e.to_string())
}

const QUANTITY_REGEX_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

#[rstest]
#[case::parse(r#"quantity("12Mi") == quantity("12582912")"#, Ok(true))]
#[case::parse_invalid_suffix(r#"quantity("10Mo") == quantity("1")"#, Err(QUANTITY_REGEX_ERROR))]
#[case::parse_invalid_suffix_passes_regex(
    r#"quantity("10Mm") == quantity("1")"#,
    Err("unable to parse quantity's suffix")
)]
#[case::parse_two_points(r#"quantity("1.5.5") == quantity("1")"#, Err(QUANTITY_REGEX_ERROR))]
#[case::parse_empty(r#"quantity("") == quantity("1")"#, Err(QUANTITY_REGEX_ERROR))]
#[case::parse_lower_binary_suffix(
    r#"quantity("1ki") == quantity("1")"#,
    Err("unable to parse quantity's suffix")
)]
#[case::parse_exponent_without_digits(
    r#"quantity("1e") == quantity("1")"#,
    Err("unable to parse quantity's suffix")
)]
#[case::is_quantity(r#"isQuantity("20")"#, Ok(true))]
#[case::is_quantity_megabytes(r#"isQuantity("20M")"#, Ok(true))]
#[case::is_quantity_mebibytes(r#"isQuantity("20Mi")"#, Ok(true))]
#[case::is_quantity_invalid_suffix(r#"isQuantity("20Mo")"#, Ok(false))]
#[case::is_quantity_passing_regex(r#"isQuantity("10Mm")"#, Ok(false))]
#[case::equality_reflexivity(r#"quantity("200M") == quantity("200M")"#, Ok(true))]
#[case::equality_symmetry(
    r#"quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")"#,
    Ok(true)
)]
#[case::equality_transitivity(
    r#"quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")"#,
    Ok(true)
)]
#[case::inequality(r#"quantity("200M") == quantity("0.3G")"#, Ok(false))]
#[case::quantity_less(r#"quantity("50M").isLessThan(quantity("50Mi"))"#, Ok(true))]
#[case::quantity_less_obvious(r#"quantity("50M").isLessThan(quantity("100M"))"#, Ok(true))]
#[case::quantity_less_false(r#"quantity("100M").isLessThan(quantity("50M"))"#, Ok(false))]
#[case::quantity_greater(r#"quantity("50Mi").isGreaterThan(quantity("50M"))"#, Ok(true))]
#[case::quantity_greater_obvious(r#"quantity("150Mi").isGreaterThan(quantity("100Mi"))"#, Ok(true))]
#[case::quantity_greater_false(r#"quantity("50M").isGreaterThan(quantity("100M"))"#, Ok(false))]
#[case::compare_equal(r#"quantity("200M").compareTo(quantity("0.2G")) == 0"#, Ok(true))]
#[case::compare_less(r#"quantity("50M").compareTo(quantity("50Mi")) == -1"#, Ok(true))]
#[case::compare_greater(r#"quantity("50Mi").compareTo(quantity("50M")) == 1"#, Ok(true))]
#[case::compare_milli_to_nano(r#"quantity("1m").compareTo(quantity("999999n")) == 1"#, Ok(true))]
#[case::add_quantity(
    r#"quantity("50k").add(quantity("20")) == quantity("50.02k")"#,
    Ok(true)
)]
#[case::add_int(r#"quantity("50k").add(20).isLessThan(quantity("50020"))"#, Ok(false))]
#[case::sub_quantity(
    r#"quantity("50k").sub(quantity("20")) == quantity("49.98k")"#,
    Ok(true)
)]
#[case::sub_int(r#"quantity("50k").sub(20) == quantity("49980")"#, Ok(true))]
#[case::arith_chain_1(
    r#"quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980"#,
    Ok(true)
)]
#[case::arith_chain(
    r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() == 20"#,
    Ok(true)
)]
#[case::as_integer(r#"quantity("50k").asInteger() == 50000"#, Ok(true))]
#[case::as_integer_error(
    r#"quantity("9999999999999999999999999999999999999G").asInteger() == 0"#,
    Err("cannot convert value to integer")
)]
#[case::is_integer_too_large(
    r#"quantity("9999999999999999999999999999999999999G").isInteger()"#,
    Ok(false)
)]
#[case::is_integer(r#"quantity("50").isInteger()"#, Ok(true))]
#[case::fraction_is_no_integer(r#"quantity("500m").isInteger()"#, Ok(false))]
#[case::one_point_zero_is_held_as_a_fraction(r#"quantity("1.0").isInteger()"#, Ok(false))]
#[case::milli_thousand_is_held_as_a_fraction(r#"quantity("1000m").isInteger()"#, Ok(false))]
#[case::fraction_with_decimal_suffix(r#"quantity("1.5k").asInteger() == 1500"#, Ok(true))]
#[case::binary_suffix(r#"quantity("1Gi").asInteger() == 1073741824"#, Ok(true))]
#[case::binary_suffix_with_fraction(r#"quantity("1.5Gi").isInteger()"#, Ok(false))]
#[case::exponent_beyond_int64(r#"quantity("1e999").isInteger()"#, Ok(false))]
#[case::eighteen_digits(r#"quantity("123456789012345678").isInteger()"#, Ok(true))]
#[case::nineteen_digits(r#"quantity("1234567890123456789").isInteger()"#, Ok(false))]
#[case::sum_at_the_smaller_scale(
    r#"quantity("1k").add(quantity("1")).asInteger() == 1001"#,
    Ok(true)
)]
#[case::sum_with_a_fraction(r#"quantity("1").add(quantity("0.5")).isInteger()"#, Ok(false))]
#[case::decimal_beyond_int64_is_capped(
    r#"quantity("9999999999999999999999999999999999999G") == quantity("9223372036854775807")"#,
    Ok(true)
)]
#[case::as_float(r#"quantity("50.703k").asApproximateFloat() == 50703.0"#, Ok(true))]
#[case::sign_negative(
    r#"quantity("-1Ki").sign() == -1 && sign(quantity("-1")) == -1"#,
    Ok(true)
)]
#[case::sign_zero_and_positive(
    r#"quantity("0").sign() == 0 && quantity("1n").sign() == 1"#,
    Ok(true)
)]
fn quantity_library(#[case] expression: &str, #[case] want: Result<bool, &str>) {
    assert_eq!(eval(expression), want.map_err(str::to_string));
}

#[rstest]
#[case::parse(r#"semver("1.2.3") == semver("1.2.3")"#, Ok(true))]
#[case::parse_invalid_version(
    r#"semver("v1.0") == semver("1.0.0")"#,
    Err("No Major.Minor.Patch elements found")
)]
#[case::is_semver(r#"isSemver("1.2.3-beta.1+build.1")"#, Ok(true))]
#[case::is_semver_empty_false(r#"isSemver("")"#, Ok(false))]
#[case::is_semver_v_prefix_false(r#"isSemver("v1.0.0")"#, Ok(false))]
#[case::is_semver_v_leading_whitespace_false(r#"isSemver(" 1.0.0")"#, Ok(false))]
#[case::is_semver_v_contains_whitespace_false(r#"isSemver("1. 0.0")"#, Ok(false))]
#[case::is_semver_v_trailing_whitespace_false(r#"isSemver("1.0.0 ")"#, Ok(false))]
#[case::is_semver_leading_zeros_false(r#"isSemver("01.01.01")"#, Ok(false))]
#[case::is_semver_major_only_false(r#"isSemver("1")"#, Ok(false))]
#[case::is_semver_major_minor_only_false(r#"isSemver("1.1")"#, Ok(false))]
#[case::is_semver_empty_normalize_false(r#"isSemver("", true)"#, Ok(false))]
#[case::is_semver_v_leading_whitespace_normalize_false(r#"isSemver(" 1.0.0", true)"#, Ok(false))]
#[case::is_semver_v_contains_whitespace_normalize_false(r#"isSemver("1. 0.0", true)"#, Ok(false))]
#[case::is_semver_v_trailing_whitespace_normalize_false(r#"isSemver("1.0.0 ", true)"#, Ok(false))]
#[case::is_semver_v_prefix_normalize_true(r#"isSemver("v1.0.0", true)"#, Ok(true))]
#[case::is_semver_leading_zeros_normalize_true(r#"isSemver("01.01.01", true)"#, Ok(true))]
#[case::is_semver_major_only_normalize_true(r#"isSemver("1", true)"#, Ok(true))]
#[case::is_semver_major_minor_only_normalize_true(r#"isSemver("1.1", true)"#, Ok(true))]
#[case::equality_normalize(r#"semver("v01.01", true) == semver("1.1.0")"#, Ok(true))]
#[case::equality_reflexivity(r#"semver("1.2.3") == semver("1.2.3")"#, Ok(true))]
#[case::inequality(r#"semver("1.2.3") == semver("1.0.0")"#, Ok(false))]
#[case::semver_less(r#"semver("1.0.0").isLessThan(semver("1.2.3"))"#, Ok(true))]
#[case::semver_less_false(r#"semver("1.0.0").isLessThan(semver("1.0.0"))"#, Ok(false))]
#[case::semver_greater(r#"semver("1.2.3").isGreaterThan(semver("1.0.0"))"#, Ok(true))]
#[case::semver_greater_false(r#"semver("1.0.0").isGreaterThan(semver("1.0.0"))"#, Ok(false))]
#[case::compare_equal(r#"semver("1.2.3").compareTo(semver("1.2.3")) == 0"#, Ok(true))]
#[case::compare_less(r#"semver("1.0.0").compareTo(semver("1.2.3")) == -1"#, Ok(true))]
#[case::compare_greater(r#"semver("1.2.3").compareTo(semver("1.0.0")) == 1"#, Ok(true))]
#[case::major(r#"semver("1.2.3").major() == 1"#, Ok(true))]
#[case::minor(r#"semver("1.2.3").minor() == 2"#, Ok(true))]
#[case::patch(r#"semver("1.2.3").patch() == 3"#, Ok(true))]
#[case::parse_prefix_error(
    r#"semver("v1.0.0") == semver("1.0.0")"#,
    Err(r#"Invalid character(s) found in major number "v1""#)
)]
#[case::parse_empty(r#"semver("") == semver("1.0.0")"#, Err("Version string empty"))]
#[case::parse_leading_zero(
    r#"semver("01.0.0") == semver("1.0.0")"#,
    Err(r#"Major number must not contain leading zeroes "01""#)
)]
#[case::parse_empty_prerelease(
    r#"semver("1.0.0-") == semver("1.0.0")"#,
    Err("Prerelease is empty")
)]
#[case::parse_prerelease_leading_zero(
    r#"semver("1.0.0-01") == semver("1.0.0")"#,
    Err(r#"Numeric PreRelease version must not contain leading zeroes "01""#)
)]
#[case::parse_empty_minor(
    r#"semver("1..0") == semver("1.0.0")"#,
    Err(r#"strconv.ParseUint: parsing "": invalid syntax"#)
)]
#[case::parse_major_out_of_range(
    r#"semver("99999999999999999999.0.0") == semver("1.0.0")"#,
    Err(r#"strconv.ParseUint: parsing "99999999999999999999": value out of range"#)
)]
#[case::parse_bad_build(
    r#"semver("1.0.0+a_b") == semver("1.0.0")"#,
    Err(r#"Invalid character(s) found in build meta data "a_b""#)
)]
#[case::normalize_short_with_prerelease(
    r#"semver("1.0-alpha", true) == semver("1.0.0")"#,
    Err("short version cannot contain PreRelease/Build meta data")
)]
#[case::build_metadata_does_not_count(r#"semver("1.2.3+build.1") == semver("1.2.3")"#, Ok(true))]
#[case::minor_compares_numerically(r#"semver("1.10.0").isGreaterThan(semver("1.9.0"))"#, Ok(true))]
#[case::prerelease_is_below_release(
    r#"semver("1.0.0-alpha").isLessThan(semver("1.0.0"))"#,
    Ok(true)
)]
#[case::numeric_prerelease_is_below_alphanumeric(
    r#"semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))"#,
    Ok(true)
)]
#[case::shorter_prerelease_is_below(
    r#"semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))"#,
    Ok(true)
)]
fn semver_library(#[case] expression: &str, #[case] want: Result<bool, &str>) {
    assert_eq!(eval(expression), want.map_err(str::to_string));
}

#[rstest]
#[case::char_at(r#"'abc'.charAt(1) == 'b'"#, Ok(true))]
#[case::char_at_out_of_range(r#"'abc'.charAt(5) == 'a'"#, Err("index out of range: 5"))]
#[case::index_of(r#"'hello mellow'.indexOf('ello') == 1"#, Ok(true))]
#[case::index_of_offset(r#"'hello mellow'.indexOf('ello', 2) == 7"#, Ok(true))]
#[case::last_index_of(r#"'hello mellow'.lastIndexOf('ello') == 7"#, Ok(true))]
#[case::lower_ascii(r#"'TacoCat'.lowerAscii() == 'tacocat'"#, Ok(true))]
#[case::upper_ascii(r#"'TacoCat'.upperAscii() == 'TACOCAT'"#, Ok(true))]
#[case::replace(r#"'hello hello'.replace('he', 'we') == 'wello wello'"#, Ok(true))]
#[case::replace_n(r#"'hello hello'.replace('he', 'we', 1) == 'wello hello'"#, Ok(true))]
#[case::split(r#"'a,b,c'.split(',') == ['a', 'b', 'c']"#, Ok(true))]
#[case::split_n(r#"'a,b,c'.split(',', 2) == ['a', 'b,c']"#, Ok(true))]
#[case::substring(
    r#"'tacocat'.substring(4) == 'cat' && 'tacocat'.substring(0, 4) == 'taco'"#,
    Ok(true)
)]
#[case::trim(r#"'  trim  '.trim() == 'trim'"#, Ok(true))]
#[case::join(
    r#"['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'"#,
    Ok(true)
)]
#[case::format(r#"'%s-%d'.format(['gpu', 1]) == 'gpu-1'"#, Ok(true))]
#[case::matches(r#"'gpu-a100'.matches('^gpu-[a-z][0-9]+$')"#, Ok(true))]
#[case::find(r#"'abc 123 456'.find('[0-9]+') == '123'"#, Ok(true))]
#[case::find_no_match(r#"'abc'.find('[0-9]+') == ''"#, Ok(true))]
#[case::find_all(r#"'abc 123 456'.findAll('[0-9]+') == ['123', '456']"#, Ok(true))]
#[case::find_all_n(r#"'1 2 3'.findAll('[0-9]', 2) == ['1', '2']"#, Ok(true))]
#[case::find_all_zero(r#"'1 2 3'.findAll('[0-9]', 0) == []"#, Ok(true))]
#[case::find_all_negative_is_every(r#"'1 2 3'.findAll('[0-9]', -1).size() == 3"#, Ok(true))]
fn strings_library(#[case] expression: &str, #[case] want: Result<bool, &str>) {
    assert_eq!(eval(expression), want.map_err(str::to_string));
}

#[rstest]
#[case::is_sorted_ints("[1, 2, 3].isSorted()", Ok(true))]
#[case::is_sorted_strings("['a', 'b', 'b', 'c'].isSorted()", Ok(true))]
#[case::is_sorted_false("[2.0, 1.0].isSorted()", Ok(false))]
#[case::is_sorted_one("[1].isSorted()", Ok(true))]
#[case::is_sorted_empty("[].isSorted()", Ok(true))]
#[case::sum_ints("[1, 3].sum() == 4", Ok(true))]
#[case::sum_doubles("[1.0, 3.0].sum() == 4.0", Ok(true))]
#[case::sum_empty("[].sum() == 0", Ok(true))]
#[case::min("[1, 3].min() == 1", Ok(true))]
#[case::max("[1, 3].max() == 3", Ok(true))]
#[case::min_empty("[].min() == 0", Err("min called on empty list"))]
#[case::min_one("[1].min() == 1", Ok(true))]
#[case::min_of_concatenation("([0] + []).min() == 0", Ok(true))]
#[case::index_of("[1, 2, 2, 3].indexOf(2) == 1", Ok(true))]
#[case::last_index_of("['a', 'b', 'b', 'c'].lastIndexOf('b') == 2", Ok(true))]
#[case::index_of_missing("[1.0].indexOf(1.1) == -1", Ok(true))]
#[case::index_of_empty("[].indexOf('string') == -1", Ok(true))]
#[case::max_of_split_attribute("'3,10,7'.split(',').map(s, int(s)).max() == 10", Ok(true))]
#[case::sets_contains("sets.contains([1, 2, 3], [3, 1])", Ok(true))]
#[case::sets_contains_empty("sets.contains([1], [])", Ok(true))]
#[case::sets_contains_missing("sets.contains([1, 2], [3])", Ok(false))]
#[case::sets_contains_numeric_equality("sets.contains([1], [1.0, 1u])", Ok(true))]
#[case::sets_equivalent("sets.equivalent([1, 2, 2], [2, 1])", Ok(true))]
#[case::sets_not_equivalent("sets.equivalent([1, 2], [1])", Ok(false))]
#[case::sets_intersects("sets.intersects(['a', 'b'], ['c', 'b'])", Ok(true))]
#[case::sets_intersects_empty("sets.intersects([1], [])", Ok(false))]
fn lists_library(#[case] expression: &str, #[case] want: Result<bool, &str>) {
    assert_eq!(eval(expression), want.map_err(str::to_string));
}

#[test]
fn cache_returns_the_same_compiled_selector() {
    let cache = SelectorCache::new(4);
    let first = cache.get("true");
    let second = cache.get("true");
    assert_eq!(
        (first.is_ok(), second.is_ok(), cache.len()),
        (true, true, 1)
    );
    if let (Ok(first), Ok(second)) = (first, second) {
        assert!(Arc::ptr_eq(&first, &second));
    }
}

#[test]
fn cache_drops_the_least_recently_used_selector() {
    let cache = SelectorCache::new(2);
    let results: Vec<bool> = ["true", "false", "true", "1 == 1"]
        .iter()
        .map(|e| cache.get(e).is_ok())
        .collect();
    assert_eq!(
        (
            results,
            cache.len(),
            cache.contains("true"),
            cache.contains("false"),
            cache.contains("1 == 1")
        ),
        (vec![true; 4], 2, true, false, true)
    );
}

#[test]
fn cache_does_not_refuse_on_the_cost_estimate() {
    let cache = SelectorCache::new(2);
    assert_eq!(cache.get(EXPENSIVE).map(|s| s.max_cost()), Ok(86_666_661));
}

#[test]
fn cache_returns_compile_errors_and_keeps_nothing_for_them() {
    let cache = SelectorCache::new(2);
    assert_eq!(
        (cache.get("1").map(|_| ()), cache.len()),
        (Err(CompileError::ResultType("int".to_string())), 0)
    );
}

#[test]
fn cache_is_shared_across_threads() {
    let cache = SelectorCache::new(8);
    let device = device(&[("model", string_attr("a100"))], &[]);
    let expressions = [
        r#"device.attributes["dra.example.com"].model == "a100""#,
        r#"device.attributes["dra.example.com"].model == "h100""#,
    ];
    let results: Vec<Vec<Result<bool, String>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..50)
                        .map(|i| {
                            let selector =
                                cache.get(expressions[i % 2]).map_err(|e| e.to_string())?;
                            selector.matches(DRIVER, &device).map_err(|e| e.to_string())
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let want: Vec<Result<bool, String>> = (0..50).map(|i| Ok(i % 2 == 0)).collect();
    assert_eq!(results, vec![want; 4]);
}

#[test]
fn one_device_value_serves_several_selectors() {
    let device = all_device();
    let expressions = [
        ALL,
        r#"device.attributes["dra.example.com"].int == 2"#,
        r#"device.attributes["dra.example.com"].missing"#,
    ];
    let value = DeviceValue::new(DRIVER, &device).map_err(|e| e.to_string());
    let by_value: Vec<Result<bool, String>> = expressions
        .iter()
        .map(|e| {
            let selector = DeviceSelector::compile(e).map_err(|e| e.to_string())?;
            let value = value.as_ref().map_err(Clone::clone)?;
            selector.matches_value(value).map_err(|e| e.to_string())
        })
        .collect();
    let by_device: Vec<Result<bool, String>> = expressions
        .iter()
        .map(|e| {
            let selector = DeviceSelector::compile(e).map_err(|e| e.to_string())?;
            selector.matches(DRIVER, &device).map_err(|e| e.to_string())
        })
        .collect();
    assert_eq!(
        (by_value.clone(), by_device),
        (
            vec![Ok(true), Ok(false), Err("no such key: missing".to_string())],
            by_value
        )
    );
}

fn nested(open: &str, inner: &str, close: &str, depth: usize) -> String {
    format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
}

/// Each of these aborted the whole process with a stack overflow on an ordinary 2 MiB
/// thread (a test thread's, a tokio worker's) before compiling and evaluating got a deep
/// stack: the cel crate's parser and interpreter recurse once or more per level.
#[rstest]
#[case::nested_parentheses(nested("(", "true", ")", 90), Ok(Ok(true)))]
#[case::nested_lists(format!("{} == [1]", nested("[", "1", "]", 90)), Ok(Ok(false)))]
#[case::long_sum(format!("1{} == 2501", " + 1".repeat(2500)), Ok(Ok(true)))]
#[case::long_field_chain(
    format!("device.driver{} == ''", ".x".repeat(3000)),
    Ok(Err("found no matching overload for '_._' applied to '(string, string)'".to_string()))
)]
#[case::parentheses_beyond_the_parser_limit(
    nested("(", "true", ")", 5000),
    Err("compilation failed: ERROR: <input>:1:97: Syntax error: OtherError(ParseError { source: None, pos: (96, -1), msg: \"Recursion limit of 96 exceeded\", expr_id: 0, source_info: None })".to_string())
)]
fn deep_expression_does_not_overflow_the_stack(
    #[case] expression: String,
    #[case] want: Result<Result<bool, String>, String>,
) {
    let got = DeviceSelector::compile(&expression)
        .map(|s| s.matches(DRIVER, &no_device()).map_err(|e| e.to_string()))
        .map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string());
    assert_eq!(got, want);
}
