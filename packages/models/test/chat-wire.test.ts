import { Prompt } from "@effect/ai"
import { describe, expect, it } from "vitest"
import { messagesJson, messagesParts, requestJson, toMessages } from "../src/internal/chatCompletions.js"
import { bytesOf, joinBetween, piecesBetween, textOf } from "../src/internal/joinJson.js"

// The request body is assembled from each message's wire JSON, kept between requests: it must be
// byte for byte what JSON.stringify of the whole request gives.

const history = Prompt.make([
  { role: "system", content: "You are a test." },
  {
    role: "user",
    content: [
      { type: "text", text: "Read README.md" },
      { type: "text", text: "please" }
    ]
  },
  {
    role: "user",
    content: [
      { type: "text", text: "look" },
      { type: "file", mediaType: "image/png", data: "iVBORw0KGgo=" },
      { type: "file", mediaType: "application/pdf", fileName: "a.pdf", data: "JVBERi0=" }
    ]
  },
  { role: "assistant", content: [{ type: "text", text: 'Sure — \u2028 "quoted" \\ and \u0000' }] },
  {
    role: "assistant",
    content: [
      { type: "text", text: "" },
      { type: "tool-call", id: "call_1", name: "read_file", params: { path: "README.md" }, providerExecuted: false },
      { type: "tool-call", id: "call_2", name: "grep", params: { pattern: "x" }, providerExecuted: false }
    ]
  },
  {
    role: "tool",
    content: [
      {
        type: "tool-result",
        id: "call_1",
        name: "read_file",
        result: { content: "# Hi\n" },
        isFailure: false,
        providerExecuted: false
      },
      { type: "tool-result", id: "call_2", name: "grep", result: "no match", isFailure: true, providerExecuted: false }
    ]
  },
  { role: "tool", content: [] }
])

describe("Chat Completions wire JSON", () => {
  it("messagesJson is JSON.stringify(toMessages(prompt)), the first time and from the cache", () => {
    const expected = JSON.stringify(toMessages(history))
    expect(messagesJson(history)).toBe(expected)
    expect(messagesJson(history)).toBe(expected)
    // the same message objects in a longer prompt: the cached ones and a new one
    const longer = Prompt.fromMessages([
      ...history.content,
      Prompt.makeMessage("user", { content: [Prompt.makePart("text", { text: "next" })] })
    ])
    expect(messagesJson(longer)).toBe(JSON.stringify(toMessages(longer)))
    expect(messagesJson(Prompt.empty)).toBe("[]")
  })

  it("requestJson gives the bytes of JSON.stringify({ ...head, messages, ...tail })", () => {
    const messages = messagesJson(history)
    const parsed = JSON.parse(messages)
    const cases: Array<[Record<string, unknown>, Record<string, unknown>]> = [
      [
        { model: "m", temperature: 0 },
        { tools: [{ type: "function" }], tool_choice: "auto", stream: true }
      ],
      [{ model: "m" }, {}],
      [{}, { stream: true }],
      [{}, {}],
      // a config field that is also a later field keeps its first place in JSON.stringify
      [
        { model: "m", stream: false, stream_options: { include_usage: false } },
        { stream: true, stream_options: { include_usage: true } }
      ],
      [{ model: "m", messages: "overridden" }, { tool_choice: "none" }]
    ]
    const one = Prompt.fromMessages([history.content[0]!])
    for (const [head, tail] of cases) {
      expect(requestJson(head, messages, tail)).toBe(JSON.stringify({ ...head, messages: parsed, ...tail }))
      // the same bytes from the messages' parts, for a history of many, one and no messages
      expect(requestJson(head, messagesParts(history), tail)).toBe(
        JSON.stringify({ ...head, messages: parsed, ...tail })
      )
      expect(requestJson(head, messagesParts(one), tail)).toBe(
        JSON.stringify({ ...head, messages: toMessages(one), ...tail })
      )
      expect(requestJson(head, messagesParts(Prompt.empty), tail)).toBe(
        JSON.stringify({ ...head, messages: [], ...tail })
      )
    }
  })

  it("joinBetween puts the prefix and suffix around the parts, joined with commas", () => {
    expect(joinBetween("[", [], "]")).toBe("[]")
    expect(joinBetween("[", ["1"], "]")).toBe("[1]")
    expect(joinBetween("[", ["1", "2"], "]")).toBe("[1,2]")
    expect(joinBetween('{"a":[', ["1", "2", "3"], "]}")).toBe('{"a":[1,2,3]}')
    expect(joinBetween("", ["", ""], "")).toBe(",")
  })

  it("bytesOf gives the UTF-8 bytes of the pieces' text, whether they start as an earlier body did or not", () => {
    const same = (pieces: ReadonlyArray<string>) =>
      expect(Buffer.from(bytesOf(pieces)).equals(Buffer.from(textOf(pieces), "utf8"))).toBe(true)
    const msg = (i: number, s = "") => JSON.stringify({ role: "tool", content: `${i} é😀 "\\u0000 ${s}`.repeat(5) })
    const history = Array.from({ length: 50 }, (_, i) => msg(i))
    const body = (h: ReadonlyArray<string>, tail = "]}") => piecesBetween('{"model":"m","messages":[', h, tail)
    expect(textOf(body(["1", "2"]))).toBe('{"model":"m","messages":[1,2]}')
    // a session's requests: each the last one and a little more (its start copied from the last body)
    for (let n = 1; n <= history.length; n++) same(body(history.slice(0, n)))
    // two sessions taking turns, each request starting as that session's last one did
    const other = Array.from({ length: 30 }, (_, i) => msg(i, "other"))
    for (let n = 1; n <= 30; n++) {
      same(body(history.slice(0, 20 + n)))
      same(body(other.slice(0, n), ']"tools":[]}'))
    }
    // the history rewritten (compacted) in the middle, a new string with the same text, the end changed
    same(body([...history.slice(0, 10), msg(99, "summary"), ...history.slice(40)]))
    same(body([...history.slice(0, 10), ` ${history[10]!}`.slice(1), ...history.slice(11)]))
    same(body(history, ',"stream":true}'))
    same(
      body(
        history.slice(0, 5).map((m) => m.replace("é", "e")),
        "]}"
      )
    )
    // a body larger than is kept, and the next one after it
    const big = Array.from({ length: 20 }, (_, i) => `"${i}${"ß".repeat(512 * 1024)}"`)
    same(piecesBetween("[", big, "]"))
    same(piecesBetween("[", [...big, '"x"'], "]"))
    // bodies that together hold more than is kept (the oldest let go), each made right
    for (let i = 1; i <= 6; i++) same(piecesBetween("[", big.slice(0, i * 2), "]"))
    same(body(history))
    same([""])
    same(["ab", "cd"])
  })
})
