// Preloaded into the MCP conformance suite (node --import): the suite sends no Authorization
// header, so wrap fetch to add the bearer token the test issued for the protected /mcp endpoint.
const token = process.env.IVOAI_CONFORMANCE_TOKEN;
const original = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  if (token && !headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
  return original(input, { ...init, headers });
};
