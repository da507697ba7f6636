//! The C API functions ic-bench calls: all must be present, or the NIXL is too old to use.

use crate::bindings::NixlCapi;

/// The names of the functions in `nixl_capi.h` that the loaded library lacks.
pub fn missing(capi: &NixlCapi) -> Vec<&'static str> {
    let mut out = Vec::new();
    macro_rules! check {
        ($($f:ident),* $(,)?) => {
            $( if capi.$f.is_err() { out.push(stringify!($f)); } )*
        };
    }
    check!(
        nixl_capi_create_agent,
        nixl_capi_create_backend,
        nixl_capi_create_notif_map,
        nixl_capi_create_opt_args,
        nixl_capi_create_params,
        nixl_capi_create_reg_dlist,
        nixl_capi_create_xfer_dlist,
        nixl_capi_create_xfer_req,
        nixl_capi_deregister_mem,
        nixl_capi_destroy_agent,
        nixl_capi_destroy_backend,
        nixl_capi_destroy_mem_list,
        nixl_capi_destroy_notif_map,
        nixl_capi_destroy_opt_args,
        nixl_capi_destroy_params,
        nixl_capi_destroy_reg_dlist,
        nixl_capi_destroy_string_list,
        nixl_capi_destroy_xfer_dlist,
        nixl_capi_get_available_plugins,
        nixl_capi_get_backend_params,
        nixl_capi_get_local_md,
        nixl_capi_get_notifs,
        nixl_capi_get_plugin_params,
        nixl_capi_get_xfer_status,
        nixl_capi_invalidate_remote_md,
        nixl_capi_load_remote_md,
        nixl_capi_opt_args_add_backend,
        nixl_capi_params_add,
        nixl_capi_params_create_iterator,
        nixl_capi_params_destroy_iterator,
        nixl_capi_params_is_empty,
        nixl_capi_params_iterator_next,
        nixl_capi_post_xfer_req,
        nixl_capi_reg_dlist_add_desc,
        nixl_capi_register_mem,
        nixl_capi_release_xfer_req,
        nixl_capi_string_list_get,
        nixl_capi_string_list_size,
        nixl_capi_xfer_dlist_add_desc,
    );
    out
}
