#include <stdio.h>
#include "ccgraph/core.h"
int main(void) { printf("ccgraph %s\n", ccg_version()); return 0; }
