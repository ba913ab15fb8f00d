import { Tools } from "@musekit/core"
import { McpPlugin } from "@musekit/plugin-mcp"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"

describe("MCP tools", () => {
  it("names are mcp__<server>__<tool>, with characters providers refuse replaced and long names shortened uniquely", () => {
    expect(McpPlugin.toolName("github", "create_issue")).toBe("mcp__github__create_issue")
    expect(McpPlugin.toolName("my.server", "do it/now")).toBe("mcp__my_server__do_it_now")
    const long = McpPlugin.toolName("server", "x".repeat(80))
    const other = McpPlugin.toolName("server", `${"x".repeat(79)}y`)
    expect(long).toHaveLength(64)
    expect(other).toHaveLength(64)
    expect(long).not.toBe(other)
    expect(long).toMatch(/^[a-zA-Z0-9_-]{1,64}$/)
  })

  it("a server's hints are claims: only a local, read-only, closed-world tool is a read tool", () => {
    expect(McpPlugin.effectOf("stdio", { readOnlyHint: true, openWorldHint: false })).toBe("read")
    expect(McpPlugin.effectOf("stdio", { readOnlyHint: true })).toBe("exec") // open world unless it says otherwise
    expect(McpPlugin.effectOf("stdio", { readOnlyHint: false, openWorldHint: false })).toBe("exec")
    expect(McpPlugin.effectOf("stdio", undefined)).toBe("exec")
    expect(McpPlugin.effectOf("http", { readOnlyHint: true, openWorldHint: false })).toBe("network")
    expect(McpPlugin.effectOf("sse", undefined)).toBe("network")
  })

  it("definitions from a recorded discovery: the server's JSON schema, checked before a call", async () => {
    const tools = await Effect.runPromise(
      McpPlugin.tools({
        discovery: {
          servers: [
            {
              name: "calc",
              transport: "stdio",
              status: "connected",
              tools: [
                {
                  name: "add",
                  description: "Add numbers",
                  inputSchema: {
                    $schema: "https://json-schema.org/draft/2020-12/schema",
                    type: "object",
                    properties: { a: { type: "number" }, b: { type: "number" } },
                    required: ["a", "b"],
                    additionalProperties: false
                  },
                  annotations: { readOnlyHint: true, openWorldHint: false }
                },
                { name: "a.b", inputSchema: { type: "object" } },
                { name: "a_b", inputSchema: { type: "object" } }
              ]
            },
            { name: "down", transport: "stdio", status: "failed", error: "could not be started", tools: [] }
          ]
        }
      })
    )
    expect(tools.map((t) => [t.name, t.effect])).toEqual([
      ["mcp__calc__add", "read"],
      ["mcp__calc__a_b", "exec"],
      [expect.stringMatching(/^mcp__calc__a_b_[0-9a-f]{8}$/), "exec"]
    ])
    const add = tools[0]!
    // a server's read-only claim does not spare the call the wait for its intent to be durable
    expect(add.durableIntent).not.toBe(false)
    expect(add.jsonSchema).toEqual({
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
      additionalProperties: false
    })
    expect(tools[1]!.description).toBe("a.b (MCP server calc)")
    const decode = (params: unknown) => Effect.runPromise(Effect.either(Tools.decodeParams(add, params)))
    expect(await decode({ a: 1, b: 2 })).toMatchObject({ _tag: "Right", right: { a: 1, b: 2 } })
    const wrong = await decode({ a: "1" })
    expect(wrong._tag === "Left" && wrong.left.message).toMatch(/arguments must have required property 'b'/)
    expect(wrong._tag === "Left" && wrong.left.message).toMatch(/arguments\/a must be number/)
    const extra = await decode({ a: 1, b: 2, c: 3 })
    expect(extra._tag === "Left" && extra.left.message).toMatch(/must NOT have additional properties/)
    expect((await decode("text"))._tag).toBe("Left")
    // with no servers (a replay), a call is a defect: replays serve results from the log
    const exit = await Effect.runPromiseExit(add.handler({ a: 1, b: 2 }, {} as never))
    expect(exit._tag).toBe("Failure")
  })

  it("results: text joined, structured content kept, images and resources named, not inlined", () => {
    expect(
      McpPlugin.resultOf({
        content: [
          { type: "text", text: "line one" },
          { type: "image", data: "AAAA", mimeType: "image/png" },
          { type: "resource", resource: { uri: "file:///a.txt", text: "inline text" } },
          { type: "resource_link", uri: "file:///b.txt", name: "b" }
        ],
        structuredContent: { ok: true }
      })
    ).toEqual({
      text: "line one\n[image image/png, 3 bytes: not shown]\ninline text\n[resource file:///b.txt (b)]",
      structuredContent: { ok: true }
    })
  })
})
