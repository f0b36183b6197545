/**
 * How many proxied /healthz requests `status` runs at once, and how long each may take: in a file of their own so
 * that main.ts can show them in --help without loading the client.
 */
export const healthzConcurrency = 32;
export const healthzTimeoutMs = 2000;
