#include <ucp/api/ucp.h>
#include <ucp/api/ucp_version.h>
