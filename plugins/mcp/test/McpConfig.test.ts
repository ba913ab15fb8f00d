import * as fs from "node:fs"
import * as path from "node:path"
import { McpConfig } from "@musekit/plugin-mcp"
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { tmpDir } from "./servers.js"

describe("McpConfig", () => {
  it("reads Claude Code's .mcp.json shape: stdio and remote servers, with or without type", () => {
    const file = McpConfig.parse(
      JSON.stringify({
        mcpServers: {
          fs: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."], env: { DEBUG: "1" } },
          typed: { type: "stdio", command: "node", args: ["server.js"] },
          remote: { type: "http", url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer ${TOKEN}" } },
          untyped: { url: "http://127.0.0.1:3001/mcp" },
          old: { type: "sse", url: "http://127.0.0.1:3001/sse" },
          slow: { command: "slow-server", timeout: 120000, startupTimeout: 90000, somethingElse: true }
        }
      }),
      "/p/.mcp.json"
    )
    expect(file.problems).toEqual([])
    expect(file.servers).toEqual({
      fs: {
        transport: "stdio",
        command: "npx",
        args: ["-y", "@modelcontextprotocol/server-filesystem", "."],
        env: { DEBUG: "1" },
        source: "/p/.mcp.json"
      },
      typed: { transport: "stdio", command: "node", args: ["server.js"], env: {}, source: "/p/.mcp.json" },
      remote: {
        transport: "http",
        url: "https://mcp.example.com/mcp",
        headers: { Authorization: "Bearer ${TOKEN}" },
        source: "/p/.mcp.json"
      },
      untyped: { transport: "http", url: "http://127.0.0.1:3001/mcp", headers: {}, source: "/p/.mcp.json" },
      old: { transport: "sse", url: "http://127.0.0.1:3001/sse", headers: {}, source: "/p/.mcp.json" },
      slow: {
        transport: "stdio",
        command: "slow-server",
        args: [],
        env: {},
        timeout: 120000,
        startupTimeout: 90000,
        source: "/p/.mcp.json"
      }
    })
  })

  it("an entry that cannot be used is reported by name; the others are kept", () => {
    const file = McpConfig.parse(
      JSON.stringify({
        mcpServers: {
          good: { command: "ok" },
          nothing: {},
          "bad name!": { command: "x" },
          wrongArgs: { command: "x", args: "--flag" },
          noUrl: { type: "http" },
          negative: { command: "x", timeout: -5 }
        }
      }),
      "/p/.muse/mcp.json"
    )
    expect(Object.keys(file.servers)).toEqual(["good"])
    expect(file.problems).toHaveLength(5)
    expect(file.problems[0]).toBe(
      '/p/.muse/mcp.json: server "nothing" needs a "command" (a local program) or a "url" (a remote server over HTTP)'
    )
    expect(file.problems[1]).toContain('server name "bad name!" must be 1 to 64 letters')
    expect(file.problems[2]).toMatch(/server "wrongArgs" is not valid: args: Expected ReadonlyArray<string>/)
    expect(file.problems[3]).toBe('/p/.muse/mcp.json: server "noUrl" has type "http" but no "url"')
    expect(file.problems[4]).toMatch(/server "negative" is not valid: timeout/)
  })

  it("a file that is not JSON, or has no servers object, is a problem naming the file", () => {
    expect(McpConfig.parse("{ nope", "/p/.muse/mcp.json").problems[0]).toMatch(
      /^\/p\/\.muse\/mcp\.json is not valid JSON \(.*\); its servers are not started$/
    )
    expect(McpConfig.parse('{"mcpServers": []}', "f").problems).toEqual([
      'f: "mcpServers" must be an object of servers by name'
    ])
    expect(McpConfig.parse("{}", "f")).toEqual({ servers: {}, problems: [] })
  })

  it("reads files; a missing one has no servers; later files replace servers of the same name", () => {
    const dir = tmpDir()
    const user = path.join(dir, "user.json")
    const project = path.join(dir, "project.json")
    fs.writeFileSync(user, JSON.stringify({ mcpServers: { a: { command: "user-a" }, b: { command: "user-b" } } }))
    fs.writeFileSync(project, JSON.stringify({ mcpServers: { b: { command: "project-b" } } }))
    const merged = McpConfig.merge([
      McpConfig.read(user),
      McpConfig.read(project),
      McpConfig.read(path.join(dir, "none"))
    ])
    expect(Object.fromEntries(Object.entries(merged.servers).map(([k, v]) => [k, (v as any).command]))).toEqual({
      a: "user-a",
      b: "project-b"
    })
    expect(merged.servers.b!.source).toBe(project)
  })

  it("fills in ${VAR} and ${VAR:-default}; an unset variable without a default is an error naming it", () => {
    const server = McpConfig.parse(
      JSON.stringify({
        mcpServers: {
          s: { command: "${BIN:-node}", args: ["--token=${TOKEN}"], env: { HOME_DIR: "${HOME_DIR}" } },
          r: { url: "https://${HOST}/mcp", headers: { Authorization: "Bearer ${TOKEN}" } }
        }
      }),
      "f"
    ).servers
    expect(McpConfig.expand(server.s!, { TOKEN: "t0k", HOME_DIR: "/h" })).toEqual(
      Either.right({ transport: "stdio", command: "node", args: ["--token=t0k"], env: { HOME_DIR: "/h" }, source: "f" })
    )
    expect(McpConfig.expand(server.r!, { TOKEN: "t0k", HOST: "example.com" })).toEqual(
      Either.right({
        transport: "http",
        url: "https://example.com/mcp",
        headers: { Authorization: "Bearer t0k" },
        source: "f"
      })
    )
    const missing = McpConfig.expand(server.r!, {})
    expect(Either.isLeft(missing) && missing.left).toBe(
      "the environment variables HOST, TOKEN are not set (used in f; set them or give a default: ${VAR:-default})"
    )
  })
})
