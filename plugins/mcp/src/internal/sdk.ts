/**
 * The MCP SDK, loaded on first use: a session with no MCP server configured never loads it (it is
 * large, and muse's start-up time matters).
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"

export interface Sdk {
  readonly Client: typeof Client
  readonly StdioClientTransport: typeof StdioClientTransport
  readonly StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport
  readonly SSEClientTransport: typeof SSEClientTransport
}

let sdk: Promise<Sdk> | undefined

export const load = (): Promise<Sdk> => {
  sdk ??= Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/client/sse.js")
  ]).then(([client, stdio, http, sse]) => ({
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    SSEClientTransport: sse.SSEClientTransport
  }))
  return sdk
}

let validator: Promise<AjvJsonSchemaValidator> | undefined

/** The SDK's JSON Schema validator (Ajv), which also checks the arguments a model gives a tool. */
export const loadValidator = (): Promise<AjvJsonSchemaValidator> => {
  validator ??= import("@modelcontextprotocol/sdk/validation/ajv").then((m) => new m.AjvJsonSchemaValidator())
  return validator
}
