/**
 * The MCP servers of a session: started (a local program over stdio, or a remote one over
 * Streamable HTTP or HTTP+SSE), asked for their tools, called, restarted after a crash, and
 * stopped with the session.
 *
 * `start` connects every server at once and lists its tools: what a new session records (a
 * `Discovery`), so that a replay knows the tools without starting anything. A resumed session
 * calls `startInBackground` instead: the tools are known from the log, and each call waits for its
 * server. A server that fails to start, stops in the middle of a call, takes longer than its
 * `timeout` or answers with something that is not a valid result gives a `CallError` whose message
 * says which server, what happened and what to do — for the model and the user alike; the next
 * call starts a stopped server again.
 *
 * @example
 * ```ts
 * import { McpConfig, McpServers } from "@musekit/plugin-mcp"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const { servers } = McpConfig.read(".muse/mcp.json")
 *   const mcp = McpServers.make({ servers, cwd: process.cwd() })
 *   const discovery = yield* mcp.start // [{ name, status: "connected", tools: [...] }, ...]
 *   const result = yield* mcp.call("everything", "echo", { message: "hi" })
 *   yield* mcp.close
 * })
 * ```
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { CallToolResult, Tool as McpTool } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Either, Schema } from "effect"
import * as Sdk from "./internal/sdk.js"
import * as McpConfig from "./McpConfig.js"

// ---------------------------------------------------------------------------------------------
// What a session records

/** A tool as a server listed it (what is kept of it). */
export const ToolSpec = Schema.Struct({
  name: Schema.String,
  title: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  inputSchema: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  annotations: Schema.optional(
    Schema.Struct({
      title: Schema.optional(Schema.String),
      readOnlyHint: Schema.optional(Schema.Boolean),
      destructiveHint: Schema.optional(Schema.Boolean),
      idempotentHint: Schema.optional(Schema.Boolean),
      openWorldHint: Schema.optional(Schema.Boolean)
    })
  )
})
export type ToolSpec = typeof ToolSpec.Type

/** A server as the session found it when it started. */
export const ServerSpec = Schema.Struct({
  name: Schema.String,
  transport: Schema.Literal("stdio", "http", "sse"),
  status: Schema.Literal("connected", "failed"),
  error: Schema.optional(Schema.String),
  /** The server's own name and version. */
  info: Schema.optional(Schema.Struct({ name: Schema.String, version: Schema.String })),
  tools: Schema.Array(ToolSpec)
})
export type ServerSpec = typeof ServerSpec.Type

/** Every server of a session, as found when it started. */
export const Discovery = Schema.Struct({ servers: Schema.Array(ServerSpec) })
export type Discovery = typeof Discovery.Type

// ---------------------------------------------------------------------------------------------

/** Why a call (or a start) did not give a result; the message is written for the model and the user. */
export class CallError extends Schema.TaggedError<CallError>("@musekit/plugin-mcp/CallError")("CallError", {
  server: Schema.String,
  reason: Schema.Literal("start", "crash", "timeout", "invalid", "protocol", "unknown-server"),
  message: Schema.String
}) {}

export type State = "idle" | "starting" | "connected" | "failed" | "stopped" | "closed"

/** A server as it is now (for `/mcp`). */
export interface Status {
  readonly name: string
  readonly transport: McpConfig.Transport
  readonly state: State
  /** What runs or is reached: the command line, or the URL. */
  readonly target: string
  readonly source: string
  readonly error?: string | undefined
  /** Process id of a local server that runs. */
  readonly pid?: number | undefined
  readonly info?: { readonly name: string; readonly version: string } | undefined
  readonly tools: ReadonlyArray<string>
}

export interface Options {
  readonly servers: Readonly<Record<string, McpConfig.Server>>
  /** Where local servers run (the project). */
  readonly cwd: string
  /** Where `${VAR}`s come from (default `process.env`). Local servers get only the SDK's safe
   * variables (HOME, PATH, SHELL, TERM, USER, LOGNAME) plus their own `env`. */
  readonly env?: NodeJS.ProcessEnv | undefined
  /** Who muse says it is to the servers. */
  readonly clientInfo?: { readonly name: string; readonly version: string } | undefined
}

export interface CallOptions {
  /** Progress notifications of the call, as text. */
  readonly onProgress?: ((text: string) => void) | undefined
}

export interface Service {
  readonly names: ReadonlyArray<string>
  /** Start every server that is not running, at once, and list their tools. */
  readonly start: Effect.Effect<Discovery>
  /** Start every server in the background (a resumed session); calls wait for theirs. */
  readonly startInBackground: Effect.Effect<void>
  readonly call: (
    server: string,
    tool: string,
    args: Record<string, unknown>,
    options?: CallOptions
  ) => Effect.Effect<CallToolResult, CallError>
  readonly status: Effect.Effect<ReadonlyArray<Status>>
  /** Stop every server (idempotent). */
  readonly close: Effect.Effect<void>
}

const DEFAULT_TIMEOUT = 60_000
const DEFAULT_STARTUP_TIMEOUT = 30_000
/** Longest a call may go on while it keeps reporting progress. */
const MAX_TOTAL_TIMEOUT = 30 * 60_000
const STDERR_TAIL = 2000

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e))
const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`

/** Local servers still running, stopped if the process exits without closing them. */
const running = new Set<{ readonly pid: number | null }>()
let exitHook = false
const watchExit = () => {
  if (exitHook) return
  exitHook = true
  process.once("exit", () => {
    for (const t of running) {
      try {
        if (t.pid) process.kill(t.pid, "SIGTERM")
      } catch {}
    }
  })
}

class Connection {
  state: State = "idle"
  error: string | undefined
  client: Client | undefined
  tools: ReadonlyArray<McpTool> = []
  info: { name: string; version: string } | undefined
  pid: number | undefined
  private stderr = ""
  private starting: Promise<Client> | undefined
  private closeTransport: (() => Promise<void>) | undefined

  constructor(
    readonly name: string,
    readonly config: McpConfig.Server,
    readonly options: Options
  ) {}

  get timeout() {
    return this.config.timeout ?? DEFAULT_TIMEOUT
  }

  private get startupTimeout() {
    return this.config.startupTimeout ?? DEFAULT_STARTUP_TIMEOUT
  }

  /** The last lines the server wrote to stderr, for messages. */
  private tail(): string {
    const t = this.stderr.trim()
    if (t === "") return ""
    const lines = t.split("\n").slice(-6).join("\n")
    return ` Its last output: ${lines.length > 600 ? `…${lines.slice(-600)}` : lines}`
  }

  /** A running client: the one there is, or a new start (one at a time). */
  connect(): Promise<Client> {
    if (this.state === "connected" && this.client) return Promise.resolve(this.client)
    if (this.state === "closed")
      return Promise.reject(new Error(`MCP server "${this.name}" was stopped with the session`))
    this.starting ??= this.open().finally(() => {
      this.starting = undefined
    })
    return this.starting
  }

  private async open(): Promise<Client> {
    this.state = "starting"
    this.error = undefined
    this.stderr = ""
    const expanded = McpConfig.expand(this.config, this.options.env ?? process.env)
    if (Either.isLeft(expanded)) return this.fail(`MCP server "${this.name}" was not started: ${expanded.left}`)
    const server = expanded.right
    const sdk = await Sdk.load()
    const client = new sdk.Client(this.options.clientInfo ?? { name: "musekit", version: "0.1.0" }, {
      capabilities: {}
    })
    let transport:
      | InstanceType<Sdk.Sdk["StdioClientTransport"]>
      | InstanceType<Sdk.Sdk["StreamableHTTPClientTransport"]>
    if (server.transport === "stdio") {
      const stdio = new sdk.StdioClientTransport({
        command: server.command,
        args: [...server.args],
        env: { ...server.env },
        cwd: this.options.cwd,
        stderr: "pipe"
      })
      stdio.stderr?.on("data", (chunk: Buffer) => {
        this.stderr = (this.stderr + chunk.toString("utf8")).slice(-STDERR_TAIL)
      })
      transport = stdio
    } else {
      let url: URL
      try {
        url = new URL(server.url)
      } catch {
        return this.fail(
          `MCP server "${this.name}" was not started: "${server.url}" is not a URL (in ${server.source})`
        )
      }
      const init = { requestInit: { headers: { ...server.headers } } }
      transport =
        server.transport === "sse"
          ? (new sdk.SSEClientTransport(url, init) as unknown as typeof transport)
          : new sdk.StreamableHTTPClientTransport(url, init)
    }
    client.onclose = () => this.closed(client)
    // a server that writes garbage or breaks the protocol: the SDK reports it here; the call that
    // is waiting fails on its own (or times out)
    client.onerror = () => {}
    const timer = { id: undefined as NodeJS.Timeout | undefined }
    const deadline = new Promise<never>((_, reject) => {
      timer.id = setTimeout(
        () => reject(new Error(`it did not answer within ${seconds(this.startupTimeout)} (startupTimeout)`)),
        this.startupTimeout
      )
    })
    try {
      await Promise.race([client.connect(transport, { timeout: this.startupTimeout }), deadline])
      const tools: Array<McpTool> = []
      let cursor: string | undefined
      for (let page = 0; page < 100; page++) {
        const listed = await Promise.race([
          client.listTools(cursor ? { cursor } : undefined, { timeout: this.startupTimeout }),
          deadline
        ])
        tools.push(...listed.tools)
        cursor = listed.nextCursor
        if (!cursor) break
      }
      clearTimeout(timer.id)
      if (this.isClosed()) {
        await client.close().catch(() => {})
        throw new Error("the session ended while it started")
      }
      this.tools = tools
      const v = client.getServerVersion()
      this.info = v ? { name: String(v.name), version: String(v.version) } : undefined
      this.client = client
      this.state = "connected"
      if ("pid" in transport && transport.pid) {
        this.pid = transport.pid
        running.add(transport)
        watchExit()
      }
      this.closeTransport = () => {
        running.delete(transport as never)
        return client.close()
      }
      return client
    } catch (e) {
      clearTimeout(timer.id)
      await client.close().catch(() => {})
      // the child's last words arrive with its exit
      await new Promise((r) => setImmediate(r))
      if (this.isClosed()) throw new Error(`MCP server "${this.name}" was stopped with the session`)
      return this.fail(`MCP server "${this.name}" could not be started: ${this.startError(e, server)}.${this.tail()}`)
    }
  }

  /** Whether `close` ran (possibly while a start was under way). */
  private isClosed(): boolean {
    return this.state === "closed"
  }

  private startError(e: unknown, server: McpConfig.Server): string {
    const code = (e as NodeJS.ErrnoException)?.code
    if (server.transport === "stdio" && code === "ENOENT") {
      return `the command "${server.command}" was not found (check "command" for "${this.name}" in ${server.source})`
    }
    if (server.transport === "stdio" && code === "EACCES") {
      return `the command "${server.command}" cannot be run (permission denied; see ${server.source})`
    }
    const text = errorText(e)
    if (/Connection closed/i.test(text)) {
      return server.transport === "stdio"
        ? `it exited before it answered (${McpConfig.describe(server)}, from ${server.source})`
        : `the connection to ${server.url} closed before the server answered`
    }
    if (server.transport !== "stdio" && /fetch failed|ECONNREFUSED|ENOTFOUND|EAI_AGAIN/i.test(text)) {
      return `${server.url} cannot be reached (${text}; check "url" in ${server.source})`
    }
    return text
  }

  private fail(message: string): never {
    this.state = "failed"
    this.error = message
    this.client = undefined
    throw new CallError({ server: this.name, reason: "start", message })
  }

  private closed(client: Client) {
    if (this.client !== client) return
    this.client = undefined
    this.pid = undefined
    if (this.state === "closed") return
    this.state = "stopped"
    this.error = `MCP server "${this.name}" stopped (it will be started again at its next call).${this.tail()}`
  }

  async close(): Promise<void> {
    this.state = "closed"
    const close = this.closeTransport
    this.closeTransport = undefined
    this.client = undefined
    this.pid = undefined
    if (close) await close().catch(() => {})
  }

  /** Call a tool; every failure is a `CallError` that says what happened. */
  async call(
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    options: CallOptions
  ): Promise<CallToolResult> {
    let client: Client
    try {
      client = await this.connect()
    } catch (e) {
      throw e instanceof CallError ? e : new CallError({ server: this.name, reason: "start", message: errorText(e) })
    }
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, {
        signal,
        timeout: this.timeout,
        resetTimeoutOnProgress: true,
        maxTotalTimeout: Math.max(MAX_TOTAL_TIMEOUT, this.timeout),
        onprogress: (p) => {
          if (options.onProgress) {
            const of = p.total !== undefined ? `${p.progress}/${p.total}` : `${p.progress}`
            options.onProgress(p.message ? `${p.message} (${of})` : of)
          }
        }
      })) as CallToolResult
    } catch (e) {
      await new Promise((r) => setImmediate(r))
      throw this.callError(e, tool)
    }
  }

  private callError(e: unknown, tool: string): CallError {
    const code = (e as { code?: unknown })?.code
    const text = errorText(e)
    const where = `MCP server "${this.name}"`
    if (this.state === "stopped" || this.state === "closed" || code === -32000) {
      return new CallError({
        server: this.name,
        reason: "crash",
        message: `${where} stopped while ${tool} was running, so the call has no result and its effect may be partial. The server will be started again at its next call.${this.tail()}`
      })
    }
    if (code === -32001) {
      return new CallError({
        server: this.name,
        reason: "timeout",
        message: `${where} did not finish ${tool} within ${seconds(this.timeout)}; the call was cancelled and its effect may be partial. (A server that needs longer can be given "timeout" in milliseconds in ${this.config.source}.)`
      })
    }
    if ((e as { name?: unknown })?.name === "ZodError" || Array.isArray((e as { issues?: unknown })?.issues)) {
      return new CallError({
        server: this.name,
        reason: "invalid",
        message: `${where} answered ${tool} with something that is not a valid MCP tool result: ${summarizeIssues(e)}`
      })
    }
    if (/output schema|structured content/i.test(text)) {
      return new CallError({
        server: this.name,
        reason: "invalid",
        message: `${where} answered ${tool} with a result that does not match the tool's own output schema: ${text.replace(/^MCP error -?\d+: /, "")}`
      })
    }
    return new CallError({ server: this.name, reason: "protocol", message: `${where} could not run ${tool}: ${text}` })
  }

  status(): Status {
    return {
      name: this.name,
      transport: this.config.transport,
      state: this.state,
      target: McpConfig.describe(this.config),
      source: this.config.source,
      error: this.error,
      pid: this.pid,
      info: this.info,
      tools: this.tools.map((t) => t.name)
    }
  }

  spec(): ServerSpec {
    return {
      name: this.name,
      transport: this.config.transport,
      status: this.state === "connected" ? "connected" : "failed",
      ...(this.state === "connected" ? {} : { error: this.error ?? `MCP server "${this.name}" did not start` }),
      ...(this.info ? { info: this.info } : {}),
      tools: this.state === "connected" ? this.tools.map(toolSpec) : []
    }
  }
}

const summarizeIssues = (e: unknown): string => {
  const issues = (e as { issues?: ReadonlyArray<{ path?: ReadonlyArray<unknown>; message?: string }> }).issues
  if (!Array.isArray(issues)) return errorText(e).slice(0, 300)
  return issues
    .slice(0, 3)
    .map((i) => `${i.path && i.path.length > 0 ? i.path.join(".") : "the result"}: ${i.message ?? "invalid"}`)
    .join("; ")
}

/** What is kept of a listed tool (plain JSON data: it goes into the log). */
const toolSpec = (t: McpTool): ToolSpec => {
  const a = t.annotations
  const annotations =
    a === undefined
      ? undefined
      : Object.fromEntries(
          (["title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const).flatMap((k) =>
            (k === "title" ? typeof a[k] === "string" : typeof a[k] === "boolean") ? [[k, a[k]]] : []
          )
        )
  return {
    name: t.name,
    ...(typeof t.title === "string" ? { title: t.title } : {}),
    ...(typeof t.description === "string" ? { description: t.description } : {}),
    inputSchema: JSON.parse(JSON.stringify(t.inputSchema ?? { type: "object" })),
    ...(annotations ? { annotations } : {})
  }
}

/** The servers of `options`, none started yet. */
export const make = (options: Options): Service => {
  const connections = new Map(
    Object.entries(options.servers).map(([name, c]) => [name, new Connection(name, c, options)])
  )
  const startAll = Effect.promise(() =>
    Promise.all([...connections.values()].map((c) => c.connect().catch(() => undefined)))
  )
  return {
    names: [...connections.keys()],
    start: Effect.map(startAll, () => ({ servers: [...connections.values()].map((c) => c.spec()) })),
    startInBackground: Effect.sync(() => {
      for (const c of connections.values()) c.connect().catch(() => undefined)
    }),
    call: (server, tool, args, callOptions = {}) => {
      const c = connections.get(server)
      if (!c) {
        return Effect.fail(
          new CallError({
            server,
            reason: "unknown-server",
            message: `MCP server "${server}" is no longer configured (it was when the session started); add it back to the MCP config to use its tools`
          })
        )
      }
      return Effect.tryPromise({
        try: (signal) => c.call(tool, args, signal, callOptions),
        catch: (e) =>
          e instanceof CallError ? e : new CallError({ server, reason: "protocol", message: errorText(e) })
      })
    },
    status: Effect.sync(() => [...connections.values()].map((c) => c.status())),
    close: Effect.promise(() => Promise.all([...connections.values()].map((c) => c.close()))).pipe(Effect.asVoid)
  }
}
