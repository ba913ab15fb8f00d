import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Scripted, scriptedModel, type Turn } from "@musekit/core/testing"
import { afterEach, describe, expect, it } from "vitest"
import * as Fake from "../../models/test/support/FakeServer.js"
import * as Wire from "../../models/test/support/wire.js"
import { createAgent, skill, tool } from "../src/PromiseAgent.js"

const dirs: Array<string> = []
const tmp = (name: string) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `muse-promise-${name}-`))
  dirs.push(d)
  return d
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

/** Answers from the prompt alone: a weather call first, then the result in words. */
const weatherTurn: Turn = (prompt) => {
  const results = prompt.content.filter((m) => m.role === "tool")
  const last = prompt.content.filter((m) => m.role === "user").at(-1)
  const asked = JSON.stringify(last?.content ?? "")
  if (asked.includes("say hi")) return Scripted.text("hi")
  if (prompt.content.at(-1)?.role !== "tool") {
    return Scripted.toolCalls([{ name: "weather", params: { city: "Utrecht", days: 2 } }])
  }
  return Scripted.text(JSON.stringify(results.at(-1)).includes("sky") ? "Clear skies in Utrecht." : "I may not look.")
}

const calls: Array<unknown> = []
const weather = tool({
  name: "weather",
  description: "The weather in a city",
  parameters: { city: { type: "string" }, days: { type: "integer", optional: true } },
  effect: "network",
  run: async ({ city, days }) => {
    calls.push({ city, days })
    return { city, sky: "clear", days: days ?? 1 }
  }
})
const shout = skill({
  name: "shout",
  description: "Asks the agent to say hi, then shouts what it said",
  run: async (args, ctx) => {
    const turn = await ctx.send(`say hi ${args}`)
    await ctx.output(turn.text.toUpperCase())
    return `${turn.text.toUpperCase()}!`
  }
})

const options = (root: string, state: string, languageModel = scriptedModel([weatherTurn]).layer) => ({
  model: "scripted/weather",
  languageModel,
  dir: root,
  stateDir: state,
  codingTools: false,
  tools: [weather],
  skills: [shout],
  // a network tool asks first
  onApproval: async (request: { readonly tool: string }) => request.tool === "weather"
})

describe("createAgent (Promise facade)", () => {
  it("send runs a typed tool, streams events, and the session replays exactly and resumes", async () => {
    const root = tmp("root")
    const state = tmp("state")
    calls.length = 0
    const agent = createAgent(options(root, state))
    const seen: Array<string> = []
    const iterate = (async () => {
      for await (const e of agent.events()) seen.push(e.type)
    })()
    const reply = await agent.send("What is the weather in Utrecht?")
    expect(reply.text).toBe("Clear skies in Utrecht.")
    expect(reply.turn?.toolCalls).toBe(1)
    expect(calls).toEqual([{ city: "Utrecht", days: 2 }])
    const skilled = await agent.send("/shout loudly")
    expect(skilled.text).toBe("HI!")
    expect(skilled.output).toEqual(["HI", "HI!"])
    await agent.close()
    await iterate
    expect(seen[0]).toBe("session.started")
    expect(seen).toContain("tool.completed")

    // the log is a muse session: its first event holds the config
    const log = fs.readFileSync(path.join(state, "sessions", `${agent.session}.jsonl`), "utf8")
    expect(log).toContain('"type":"session.started"')

    // replay: no model, no tool run
    calls.length = 0
    const again = createAgent({ ...options(root, state, scriptedModel([]).layer), session: agent.session })
    const report = await again.replay({ verify: true })
    expect(report.matched).toBe(report.total)
    expect(report.total).toBe(seen.length)
    expect(calls).toEqual([])

    // resume: replays the log, then goes on live on the same session
    const resumed = createAgent({ ...options(root, state), session: agent.session })
    await resumed.resume()
    expect(calls).toEqual([])
    const more = await resumed.send("What is the weather in Utrecht?")
    expect(more.text).toBe("Clear skies in Utrecht.")
    await resumed.close()
    const after = await createAgent({
      ...options(root, state, scriptedModel([]).layer),
      session: agent.session
    }).replay({
      verify: true
    })
    expect(after.total).toBeGreaterThan(report.total)
    expect(after.matched).toBe(after.total)
  })

  it("a tool's arguments are checked before it runs; a bad call goes back to the model", async () => {
    const root = tmp("root")
    const state = tmp("state")
    calls.length = 0
    const bad: Turn = (prompt) =>
      prompt.content.some((m) => m.role === "tool")
        ? Scripted.text("gave up")
        : Scripted.toolCalls([{ name: "weather", params: { city: 7 } }])
    const agent = createAgent(options(root, state, scriptedModel([bad]).layer))
    const reply = await agent.send("weather?")
    await agent.close()
    expect(reply.text).toBe("gave up")
    expect(reply.turn?.toolCalls).toBe(1)
    expect(calls).toEqual([])
  })

  it("without onApproval a network tool is refused, and the model is told", async () => {
    calls.length = 0
    const agent = createAgent({ ...options(tmp("root"), tmp("state")), onApproval: undefined })
    const reply = await agent.send("What is the weather in Utrecht?")
    await agent.close()
    expect(reply.text).toBe("I may not look.")
    expect(calls).toEqual([])
  })

  it("resume of a session that does not exist rejects with the reason", async () => {
    const agent = createAgent({ ...options(tmp("root"), tmp("state")), session: "nope" })
    await expect(agent.resume()).rejects.toThrow(/nope/)
  })

  it("reaches a model server over Node's http client by default, over fetch when asked", async () => {
    const server = await Fake.listen({ fallback: Fake.sse(Wire.chat.text("Hello from the server."), { gapMs: 0 }) })
    try {
      const ask = async (modelOptions: { readonly http?: "node" | "fetch"; readonly userAgent?: string }) => {
        const agent = createAgent({
          model: "openai-compatible/fake-model",
          modelOptions: { baseUrl: `${server.url}/v1`, apiKey: "sk-fake", env: {}, ...modelOptions },
          dir: tmp("root"),
          stateDir: tmp("state"),
          codingTools: false
        })
        const reply = await agent.send("Say hello")
        await agent.close()
        return reply.text
      }
      expect(await ask({})).toBe("Hello from the server.")
      expect(await ask({ userAgent: "team-agent/2.0" })).toBe("Hello from the server.")
      expect(await ask({ http: "fetch" })).toBe("Hello from the server.")
      const { version } = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"))
      expect(server.requests.map((r) => [r.url, r.headers["user-agent"]])).toEqual([
        ["/v1/chat/completions", `musekit/${version}`],
        ["/v1/chat/completions", "team-agent/2.0"],
        // (undici's own)
        ["/v1/chat/completions", "node"]
      ])
    } finally {
      await server.close()
    }
  })
})
