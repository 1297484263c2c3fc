#include "nc_roles_impl.h"
