//! Generates the NIXL C API bindings from `nixl_capi.h` (this crate's own declaration of the
//! subset ic-bench calls) in bindgen's dynamic-loading mode: nothing links against NIXL at build
//! time, and each function is a `Result` filled from whatever `libnixl_capi.so` is found at run
//! time. The header needs only the C standard headers, so this builds on machines without NIXL.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=nixl_capi.h");
    if let Err(message) = generate() {
        println!("cargo::error={message}");
    }
}

fn generate() -> Result<(), String> {
    let bindings = bindgen::Builder::default()
        .header("nixl_capi.h")
        .dynamic_library_name("NixlCapi")
        .dynamic_link_require_all(false)
        .allowlist_function("nixl_capi_.*")
        .allowlist_type("nixl_capi_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .map_err(|e| {
            format!("bindgen failed on nixl_capi.h ({e}); is libclang installed? `scripts/setup` installs it")
        })?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set (run through cargo)")?);
    bindings
        .write_to_file(out.join("bindings.rs"))
        .map_err(|e| format!("cannot write bindings into {}: {e}", out.display()))
}
