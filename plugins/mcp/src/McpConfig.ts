/**
 * MCP server configuration in the shape of Claude Code's `.mcp.json`, so existing files work:
 *
 * ```json
 * { "mcpServers": {
 *     "fs":     { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": { "DEBUG": "0" } },
 *     "remote": { "type": "http", "url": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer ${TOKEN}" } } } }
 * ```
 *
 * A server is a local program spoken to over stdio (`command`, `args`, `env`; `"type": "stdio"` may
 * be given) or a remote one over Streamable HTTP (`url`, `headers`; `"type": "http"`, or `"sse"`
 * for the older HTTP+SSE transport). `${VAR}` and `${VAR:-default}` in commands, arguments,
 * environment values, URLs and headers are taken from the environment when the server starts.
 * muse also reads `timeout` (milliseconds a tool call may take, default 60 000, reset by progress
 * notifications) and `startupTimeout` (milliseconds to start and list tools, default 30 000).
 * Other fields are ignored; a server entry that cannot be used is reported by name and the others
 * still start.
 *
 * @example
 * ```ts
 * import { McpConfig } from "@musekit/plugin-mcp"
 *
 * const file = McpConfig.parse('{"mcpServers":{"everything":{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"]}}}', "mcp.json")
 * file.servers.everything // { transport: "stdio", command: "npx", args: [...], env: {}, source: "mcp.json" }
 * McpConfig.expand(file.servers.everything!, process.env) // ${VAR}s filled in, or an error naming the variable
 * ```
 */
import * as fs from "node:fs"
import { Either, ParseResult, Schema } from "effect"

/** Transports muse speaks: stdio (a local program), Streamable HTTP, and the older HTTP+SSE. */
export type Transport = "stdio" | "http" | "sse"

const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
const Millis = Schema.Number.pipe(Schema.int(), Schema.positive())

const Entry = Schema.Struct({
  type: Schema.optional(Schema.Literal("stdio", "http", "sse", "streamable-http", "streamableHttp")),
  command: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  args: Schema.optional(Schema.Array(Schema.String)),
  env: Schema.optional(StringMap),
  url: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  headers: Schema.optional(StringMap),
  timeout: Schema.optional(Millis),
  startupTimeout: Schema.optional(Millis)
})

/** One server as configured (before `${VAR}` expansion). */
export type Server =
  | {
      readonly transport: "stdio"
      readonly command: string
      readonly args: ReadonlyArray<string>
      readonly env: Readonly<Record<string, string>>
      readonly timeout?: number | undefined
      readonly startupTimeout?: number | undefined
      /** The file it came from (for messages), or who gave it (`the editor`). */
      readonly source: string
    }
  | {
      readonly transport: "http" | "sse"
      readonly url: string
      readonly headers: Readonly<Record<string, string>>
      readonly timeout?: number | undefined
      readonly startupTimeout?: number | undefined
      readonly source: string
    }

export interface File {
  readonly servers: Readonly<Record<string, Server>>
  /** Entries that could not be used, with why (each names the server and the file). */
  readonly problems: ReadonlyArray<string>
}

const decodeEntry = Schema.decodeUnknownEither(Entry, { errors: "all", onExcessProperty: "ignore" })

/** A server name muse can use: the tool names it gives are `mcp__<name>__<tool>`. */
export const validName = (name: string): boolean => /^[A-Za-z0-9_.-]{1,64}$/.test(name)

/** One server entry, or why it cannot be used. */
export const entry = (name: string, value: unknown, source: string): Either.Either<Server, string> => {
  if (!validName(name)) {
    return Either.left(
      `${source}: server name "${name}" must be 1 to 64 letters, digits, "_", "-" or "." (it names its tools: mcp__<server>__<tool>)`
    )
  }
  const r = decodeEntry(value)
  if (Either.isLeft(r)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(r.left)
      .map((i) => `${i.path.length > 0 ? i.path.join(".") : "the entry"}: ${i.message}`)
      .join("; ")
    return Either.left(`${source}: server "${name}" is not valid: ${issues}`)
  }
  const e = r.right
  const timeouts = {
    ...(e.timeout !== undefined ? { timeout: e.timeout } : {}),
    ...(e.startupTimeout !== undefined ? { startupTimeout: e.startupTimeout } : {})
  }
  const remote = e.type === "http" || e.type === "sse" || e.type === "streamable-http" || e.type === "streamableHttp"
  if (remote || (e.type === undefined && e.url !== undefined && e.command === undefined)) {
    if (e.url === undefined) return Either.left(`${source}: server "${name}" has type "${e.type}" but no "url"`)
    return Either.right({
      transport: e.type === "sse" ? "sse" : "http",
      url: e.url,
      headers: e.headers ?? {},
      ...timeouts,
      source
    })
  }
  if (e.command === undefined) {
    return Either.left(
      `${source}: server "${name}" needs a "command" (a local program) or a "url" (a remote server over HTTP)`
    )
  }
  return Either.right({
    transport: "stdio",
    command: e.command,
    args: e.args ?? [],
    env: e.env ?? {},
    ...timeouts,
    source
  })
}

/** Read the `mcpServers` of a parsed config (a `.mcp.json`, or a muse config file that has the key). */
export const fromJson = (json: unknown, source: string): File => {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return { servers: {}, problems: [`${source}: expected a JSON object with "mcpServers"`] }
  }
  const raw = (json as { mcpServers?: unknown }).mcpServers
  if (raw === undefined) return { servers: {}, problems: [] }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { servers: {}, problems: [`${source}: "mcpServers" must be an object of servers by name`] }
  }
  const servers: Record<string, Server> = {}
  const problems: Array<string> = []
  for (const [name, value] of Object.entries(raw)) {
    const r = entry(name, value, source)
    if (Either.isRight(r)) servers[name] = r.right
    else problems.push(r.left)
  }
  return { servers, problems }
}

/** Parse the text of a config file. */
export const parse = (text: string, source: string): File => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return {
      servers: {},
      problems: [`${source} is not valid JSON (${(e as Error).message}); its servers are not started`]
    }
  }
  return fromJson(json, source)
}

/** Read a config file; a missing file has no servers. */
export const read = (file: string): File => {
  let text: string
  try {
    text = fs.readFileSync(file, "utf8")
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { servers: {}, problems: [] }
    return { servers: {}, problems: [`${file} cannot be read: ${(e as Error).message}`] }
  }
  return parse(text, file)
}

/** Files merged in order: a later file's server replaces an earlier one of the same name. */
export const merge = (files: ReadonlyArray<File>): File => ({
  servers: Object.assign({}, ...files.map((f) => f.servers)),
  problems: files.flatMap((f) => f.problems)
})

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** `${VAR}` and `${VAR:-default}` filled in from `env`; a variable that is unset and has no default is an error. */
export const expandText = (text: string, env: NodeJS.ProcessEnv): Either.Either<string, string> => {
  const missing: Array<string> = []
  const out = text.replace(VAR, (_, name: string, fallback: string | undefined) => {
    const v = env[name]
    if (v !== undefined && v !== "") return v
    if (fallback !== undefined) return fallback
    missing.push(name)
    return ""
  })
  return missing.length > 0 ? Either.left(missing.join(", ")) : Either.right(out)
}

/** The server with every `${VAR}` filled in, or an error that names the variables missing. */
export const expand = (server: Server, env: NodeJS.ProcessEnv): Either.Either<Server, string> => {
  const missing = new Set<string>()
  const x = (s: string) =>
    Either.getOrElse(
      Either.mapLeft(expandText(s, env), (m) => {
        for (const v of m.split(", ")) missing.add(v)
        return s
      }),
      (s) => s
    )
  const map = (m: Readonly<Record<string, string>>) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k, x(v)]))
  const expanded: Server =
    server.transport === "stdio"
      ? { ...server, command: x(server.command), args: server.args.map(x), env: map(server.env) }
      : { ...server, url: x(server.url), headers: map(server.headers) }
  if (missing.size > 0) {
    return Either.left(
      `the environment variable${missing.size === 1 ? "" : "s"} ${[...missing].join(", ")} ${missing.size === 1 ? "is" : "are"} not set (used in ${server.source}; set ${missing.size === 1 ? "it" : "them"} or give a default: \${VAR:-default})`
    )
  }
  return Either.right(expanded)
}

/** What a server runs or reaches, in one line (for `/mcp` and messages). */
export const describe = (server: Server): string =>
  server.transport === "stdio"
    ? [server.command, ...server.args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(" ")
    : `${server.url} (${server.transport === "sse" ? "HTTP+SSE" : "Streamable HTTP"})`
