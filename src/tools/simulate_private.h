/*
 * simulate_private.h - what simulate.c (replay, MIN, the command) and
 * trace.c (the traces) share and no other module sees.
 */
#ifndef DLCACHE_SIMULATE_PRIVATE_H
#define DLCACHE_SIMULATE_PRIVATE_H

/* The largest lognormal sigma: the sampler's limit, and --sigma's. */
#define SIMULATE_MAX_SIGMA 8.0      /* keeps exp(sigma * z) a finite float */

#endif
