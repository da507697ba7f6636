#include <ucp/api/ucp.h>
#include <ucp/api/ucp_version.h>
/* UCX's log handler stack (the log is captured and summarised), and vsnprintf to format a
 * message from the handler's va_list with the same va_list type bindgen gives the handler. */
#include <ucs/debug/log_def.h>
#include <stdio.h>
