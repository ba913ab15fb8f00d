/**
 * @musekit/plugin-mcp — MCP servers as MuseKit tools: local servers over stdio and remote ones over
 * Streamable HTTP (or HTTP+SSE), configured in the shape of Claude Code's `.mcp.json`. Their tools
 * appear as `mcp__<server>__<tool>`, go through approvals, and are recorded in the event log.
 *
 * @example
 * ```ts
 * import { McpConfig, McpPlugin } from "@musekit/plugin-mcp"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const { servers, problems } = McpConfig.read(".muse/mcp.json")
 *   const { plugin, discovery } = yield* McpPlugin.connect({ servers, cwd: process.cwd() })
 *   // Plugin.layer([plugin]); discovery.servers[0].tools lists what the first server offers
 * }).pipe(Effect.scoped)
 * ```
 */
export * as McpConfig from "./McpConfig.js"
export * as McpPlugin from "./McpPlugin.js"
export * as McpServers from "./McpServers.js"
