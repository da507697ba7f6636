/*
 * The subset of NIXL's C API (libnixl_capi.so) that ic-bench calls, declared for bindgen.
 *
 * Written for ic-bench from the symbols `nm -D libnixl_capi.so` exports (NIXL 1.5.1 wheel:
 * 104 nixl_capi_* functions) and the types they take; not NIXL's own header, which the PyPI
 * wheel does not ship. Every function here is loaded at run time and may be absent: a missing
 * one is reported as "NIXL too old" by the loader, never called.
 *
 * Conventions of the C API relied on:
 * - every function returns a nixl_capi_status_t; 0 is success, 1 "in progress" (transfers);
 * - handles are opaque pointers created and destroyed by the library;
 * - byte buffers handed out (local metadata, agent names) are malloc()ed: the caller free()s them.
 * Descriptor adders take (addr, len, dev_id); the registration adder takes a trailing optional
 * (metadata, metadata_len) pair in recent releases, always passed as (NULL, 0) here, which is
 * also harmless for an older two-argument-shorter signature under the SysV x86-64/aarch64 ABIs.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NIXL_CAPI_SUCCESS = 0,
    NIXL_CAPI_IN_PROG = 1,
    NIXL_CAPI_ERROR_INVALID_PARAM = -1,
    NIXL_CAPI_ERROR_BACKEND = -2,
    NIXL_CAPI_ERROR_INVALID_STATE = -3,
    NIXL_CAPI_ERROR_EXCEPTION = -4,
    NIXL_CAPI_ERROR_NO_TELEMETRY = -5,
    NIXL_CAPI_ERROR_NOT_FOUND = -6,
} nixl_capi_status_t;

typedef enum {
    NIXL_CAPI_MEM_DRAM = 0,
    NIXL_CAPI_MEM_VRAM = 1,
    NIXL_CAPI_MEM_BLOCK = 2,
    NIXL_CAPI_MEM_OBJECT = 3,
    NIXL_CAPI_MEM_FILE = 4,
    NIXL_CAPI_MEM_UNKNOWN = 5,
} nixl_capi_mem_type_t;

typedef enum {
    NIXL_CAPI_XFER_OP_READ = 0,
    NIXL_CAPI_XFER_OP_WRITE = 1,
} nixl_capi_xfer_op_t;

typedef struct nixl_capi_agent_s *nixl_capi_agent_t;
typedef struct nixl_capi_params_s *nixl_capi_params_t;
typedef struct nixl_capi_mem_list_s *nixl_capi_mem_list_t;
typedef struct nixl_capi_string_list_s *nixl_capi_string_list_t;
typedef struct nixl_capi_backend_s *nixl_capi_backend_t;
typedef struct nixl_capi_opt_args_s *nixl_capi_opt_args_t;
typedef struct nixl_capi_param_iter_s *nixl_capi_param_iter_t;
typedef struct nixl_capi_xfer_dlist_s *nixl_capi_xfer_dlist_t;
typedef struct nixl_capi_reg_dlist_s *nixl_capi_reg_dlist_t;
typedef struct nixl_capi_xfer_req_s *nixl_capi_xfer_req_t;
typedef struct nixl_capi_notif_map_s *nixl_capi_notif_map_t;

/* Agents and metadata */
nixl_capi_status_t nixl_capi_create_agent(const char *name, nixl_capi_agent_t *agent);
nixl_capi_status_t nixl_capi_destroy_agent(nixl_capi_agent_t agent);
nixl_capi_status_t nixl_capi_get_local_md(nixl_capi_agent_t agent, void **data, size_t *len);
nixl_capi_status_t nixl_capi_load_remote_md(nixl_capi_agent_t agent, const void *data, size_t len,
                                            char **agent_name);
nixl_capi_status_t nixl_capi_invalidate_remote_md(nixl_capi_agent_t agent, const char *remote_agent);

/* Plugins, parameters, backends */
nixl_capi_status_t nixl_capi_get_available_plugins(nixl_capi_agent_t agent,
                                                   nixl_capi_string_list_t *plugins);
nixl_capi_status_t nixl_capi_destroy_string_list(nixl_capi_string_list_t list);
nixl_capi_status_t nixl_capi_string_list_size(nixl_capi_string_list_t list, size_t *size);
nixl_capi_status_t nixl_capi_string_list_get(nixl_capi_string_list_t list, size_t index,
                                             const char **str);
nixl_capi_status_t nixl_capi_get_plugin_params(nixl_capi_agent_t agent, const char *plugin_name,
                                               nixl_capi_mem_list_t *mems,
                                               nixl_capi_params_t *params);
nixl_capi_status_t nixl_capi_get_backend_params(nixl_capi_agent_t agent,
                                                nixl_capi_backend_t backend,
                                                nixl_capi_mem_list_t *mems,
                                                nixl_capi_params_t *params);
nixl_capi_status_t nixl_capi_destroy_mem_list(nixl_capi_mem_list_t list);
nixl_capi_status_t nixl_capi_create_params(nixl_capi_params_t *params);
nixl_capi_status_t nixl_capi_destroy_params(nixl_capi_params_t params);
nixl_capi_status_t nixl_capi_params_add(nixl_capi_params_t params, const char *key,
                                        const char *value);
nixl_capi_status_t nixl_capi_params_create_iterator(nixl_capi_params_t params,
                                                    nixl_capi_param_iter_t *iter);
nixl_capi_status_t nixl_capi_params_iterator_next(nixl_capi_param_iter_t iter, const char **key,
                                                  const char **value, bool *has_next);
nixl_capi_status_t nixl_capi_params_destroy_iterator(nixl_capi_param_iter_t iter);
nixl_capi_status_t nixl_capi_params_is_empty(nixl_capi_params_t params, bool *is_empty);
nixl_capi_status_t nixl_capi_create_backend(nixl_capi_agent_t agent, const char *plugin_name,
                                            nixl_capi_params_t params,
                                            nixl_capi_backend_t *backend);
nixl_capi_status_t nixl_capi_destroy_backend(nixl_capi_backend_t backend);

/* Optional arguments */
nixl_capi_status_t nixl_capi_create_opt_args(nixl_capi_opt_args_t *args);
nixl_capi_status_t nixl_capi_destroy_opt_args(nixl_capi_opt_args_t args);
nixl_capi_status_t nixl_capi_opt_args_add_backend(nixl_capi_opt_args_t args,
                                                  nixl_capi_backend_t backend);

/* Registration */
nixl_capi_status_t nixl_capi_create_reg_dlist(nixl_capi_mem_type_t mem_type,
                                              nixl_capi_reg_dlist_t *dlist);
nixl_capi_status_t nixl_capi_destroy_reg_dlist(nixl_capi_reg_dlist_t dlist);
nixl_capi_status_t nixl_capi_reg_dlist_add_desc(nixl_capi_reg_dlist_t dlist, uintptr_t addr,
                                                size_t len, uint64_t dev_id, const void *metadata,
                                                size_t metadata_len);
nixl_capi_status_t nixl_capi_register_mem(nixl_capi_agent_t agent, nixl_capi_reg_dlist_t dlist,
                                          nixl_capi_opt_args_t opt_args);
nixl_capi_status_t nixl_capi_deregister_mem(nixl_capi_agent_t agent, nixl_capi_reg_dlist_t dlist,
                                            nixl_capi_opt_args_t opt_args);

/* Transfers */
nixl_capi_status_t nixl_capi_create_xfer_dlist(nixl_capi_mem_type_t mem_type,
                                               nixl_capi_xfer_dlist_t *dlist);
nixl_capi_status_t nixl_capi_destroy_xfer_dlist(nixl_capi_xfer_dlist_t dlist);
nixl_capi_status_t nixl_capi_xfer_dlist_add_desc(nixl_capi_xfer_dlist_t dlist, uintptr_t addr,
                                                 size_t len, uint64_t dev_id);
nixl_capi_status_t nixl_capi_create_xfer_req(nixl_capi_agent_t agent,
                                             nixl_capi_xfer_op_t operation,
                                             nixl_capi_xfer_dlist_t local_descs,
                                             nixl_capi_xfer_dlist_t remote_descs,
                                             const char *remote_agent,
                                             nixl_capi_xfer_req_t *req_hndl,
                                             nixl_capi_opt_args_t opt_args);
nixl_capi_status_t nixl_capi_post_xfer_req(nixl_capi_agent_t agent, nixl_capi_xfer_req_t req_hndl,
                                           nixl_capi_opt_args_t opt_args);
nixl_capi_status_t nixl_capi_get_xfer_status(nixl_capi_agent_t agent,
                                             nixl_capi_xfer_req_t req_hndl);
nixl_capi_status_t nixl_capi_release_xfer_req(nixl_capi_agent_t agent, nixl_capi_xfer_req_t req);

/* Notifications: polled by the passive side, which is what progresses its UCX worker. */
nixl_capi_status_t nixl_capi_create_notif_map(nixl_capi_notif_map_t *notif_map);
nixl_capi_status_t nixl_capi_destroy_notif_map(nixl_capi_notif_map_t notif_map);
nixl_capi_status_t nixl_capi_get_notifs(nixl_capi_agent_t agent, nixl_capi_notif_map_t notif_map,
                                        nixl_capi_opt_args_t opt_args);
