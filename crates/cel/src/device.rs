//! The `device` variable a selector sees, built from a ResourceSlice's device.
//!
//! Upstream: dynamic-resource-allocation/cel `DeviceMatches` and `newStringInterfaceMapWithDefault`.

use std::collections::HashMap;

use cel::common::traits::{Container, Indexer, Iterable, Sizer};
use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString, Type, MAP_TYPE};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::context::VariableResolver;
use cel::ExecutionError;
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

use crate::quantity::Quantity;
use crate::semver::Semver;
use crate::EvalError;

type Entries = HashMap<CelMapKey<'static>, Box<dyn Val>>;

/// A device as a selector sees it: the `device` variable.
#[derive(Debug)]
pub struct DeviceValue {
    device: CelMap<'static>,
}

impl DeviceValue {
    /// The `device` variable for `device` of driver `driver`. Fails as a match does when an
    /// attribute has no value a selector can be given (a version that is not semver).
    pub fn new(driver: &str, device: &Device) -> Result<DeviceValue, EvalError> {
        device_value(driver, device).map(|device| DeviceValue { device })
    }
}

impl VariableResolver for DeviceValue {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == "device").then_some(CowVal::Borrowed(&self.device))
    }
}

fn device_value(driver: &str, device: &Device) -> Result<CelMap<'static>, EvalError> {
    let mut attributes: HashMap<String, Entries> = HashMap::new();
    for (name, attribute) in device.attributes.iter().flatten() {
        let value = attribute_value(attribute).map_err(|reason| EvalError::Attribute {
            name: name.clone(),
            reason,
        })?;
        let (domain, id) = split_qualified_name(name, driver);
        attributes
            .entry(domain.to_string())
            .or_default()
            .insert(CelMapKey::from(id.to_string()), value);
    }
    let mut capacity: HashMap<String, Entries> = HashMap::new();
    for (name, cap) in device.capacity.iter().flatten() {
        // The API server accepts only valid quantities; one that is not anyway (a slice from
        // elsewhere) is left out, as if the device did not have it.
        let Ok(value) = Quantity::parse(&cap.value.0) else {
            continue;
        };
        let (domain, id) = split_qualified_name(name, driver);
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(CelMapKey::from(id.to_string()), Box::new(value));
    }
    let mut fields: Entries = HashMap::new();
    fields.insert(
        CelMapKey::from("driver".to_string()),
        Box::new(CelString::from(driver.to_string())),
    );
    fields.insert(
        CelMapKey::from("attributes".to_string()),
        Box::new(DomainMap::new(attributes)),
    );
    fields.insert(
        CelMapKey::from("capacity".to_string()),
        Box::new(DomainMap::new(capacity)),
    );
    fields.insert(
        CelMapKey::from("allowMultipleAllocations".to_string()),
        Box::new(CelBool::from(
            device.allow_multiple_allocations.unwrap_or(false),
        )),
    );
    Ok(CelMap::from(fields))
}

/// The one value an attribute holds; a version as a semver value.
fn attribute_value(attribute: &DeviceAttribute) -> Result<Box<dyn Val>, String> {
    if let Some(i) = attribute.int {
        return Ok(Box::new(CelInt::from(i)));
    }
    if let Some(b) = attribute.bool {
        return Ok(Box::new(CelBool::from(b)));
    }
    if let Some(s) = &attribute.string {
        return Ok(Box::new(CelString::from(s.clone())));
    }
    if let Some(v) = &attribute.version {
        return Semver::parse(v)
            .map(|v| Box::new(v) as Box<dyn Val>)
            .map_err(|e| format!("parse semantic version: {e}"));
    }
    Err("unsupported attribute value".to_string())
}

/// `domain/id` split at the first slash; a name without one is in `default_domain`.
fn split_qualified_name<'a>(name: &'a str, default_domain: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((default_domain, name))
}

/// `device.attributes` and `device.capacity`: a map from domain to a map, where a domain
/// with no entries is an empty map rather than a missing key, so that
/// `device.attributes["other.example.com"].x` says which attribute is missing.
#[derive(Debug, Clone)]
struct DomainMap {
    domains: CelMap<'static>,
    empty: CelMap<'static>,
}

impl DomainMap {
    fn new(domains: HashMap<String, Entries>) -> Self {
        let domains: Entries = domains
            .into_iter()
            .map(|(domain, entries)| {
                (
                    CelMapKey::from(domain),
                    Box::new(CelMap::from(entries)) as Box<dyn Val>,
                )
            })
            .collect();
        DomainMap {
            domains: CelMap::from(domains),
            empty: CelMap::default(),
        }
    }
}

impl Val for DomainMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.domains.as_container()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.domains.as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.domains.as_sizer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<DomainMap>() {
            Some(other) => self.domains.equals(&other.domains),
            None => self.domains.equals(other),
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }
}

impl StaticVal for DomainMap {}

impl Indexer for DomainMap {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self.domains.get(idx) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::Borrowed(&self.empty)),
            other => other,
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}
