import { Prompt } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { encode } from "gpt-tokenizer"
import { Tokens } from "../src/index.js"
import { observation } from "./fixtures.js"

const prose = (chars: number) => {
  const words = "the quick brown fox jumps over the lazy dog while parsing configuration files".split(" ")
  let s = ""
  for (let i = 0; s.length < chars; i++) s += words[(i * 7) % words.length] + (i % 13 === 0 ? ".\n" : " ")
  return s
}

describe("Tokens", () => {
  it("counts short text exactly like the tokenizer", () => {
    expect(Tokens.countText("hello world")).toBe(2)
    expect(Tokens.countText("")).toBe(0)
    const text = observation(3, 900)
    expect(Tokens.countText(text)).toBe(encode(text).length)
    // special-token text is counted as text, not refused
    expect(Tokens.countText("a <|endoftext|> b")).toBeGreaterThan(3)
  })

  it("counts long text in slices within 0.5 % of the exact count", () => {
    for (const text of [prose(120_000), observation(9, 60_000)]) {
      const exact = encode(text).length
      const sliced = Tokens.countText(text)
      expect(Math.abs(sliced - exact) / exact).toBeLessThan(0.005)
    }
  })

  it("stays fast on long runs without spaces (the tokenizer's quadratic case)", () => {
    const cjk = "漢字仮名交じり文".repeat(10_000) // 80k characters, one pre-token for the tokenizer
    const started = performance.now()
    const n = Tokens.countText(cjk)
    const ms = performance.now() - started
    expect(n).toBeGreaterThan(20_000)
    // unsliced, 20k characters of this take about 4 s and 40k about 15 s on a 2-core machine
    expect(ms).toBeLessThan(3_000)
  })

  it("counts a message from its text, tool calls, tool results and files", () => {
    const output = observation(1)
    const messages: Array<Prompt.MessageEncoded> = [
      { role: "user", content: [{ type: "text", text: "read it" }] },
      {
        role: "assistant",
        content: [{ type: "tool-call", id: "c1", name: "inspect", params: { step: 1 }, providerExecuted: false }]
      },
      {
        role: "tool",
        content: [
          { type: "tool-result", id: "c1", name: "inspect", isFailure: false, result: output, providerExecuted: false }
        ]
      },
      { role: "user", content: [{ type: "file", mediaType: "image/png", data: "blob:abc" }] }
    ]
    const counts = messages.map(Tokens.countMessage)
    expect(counts[0]).toBe(Tokens.MESSAGE_OVERHEAD + 2)
    expect(counts[1]).toBe(
      Tokens.MESSAGE_OVERHEAD + Tokens.PART_OVERHEAD + encode("inspect").length + encode('{"step":1}').length
    )
    expect(counts[2]).toBe(
      Tokens.MESSAGE_OVERHEAD + Tokens.PART_OVERHEAD + encode("inspect").length + Tokens.countText(output)
    )
    expect(counts[3]).toBe(Tokens.MESSAGE_OVERHEAD + Tokens.FILE_TOKENS)
    // a decoded prompt (what a provider receives) counts the same as the encoded messages
    const prompt = Prompt.make([{ role: "system", content: "Be brief." }, ...messages])
    expect(Tokens.countPrompt(prompt)).toBe(
      Tokens.MESSAGE_OVERHEAD + Tokens.countText("Be brief.") + counts.reduce((a, b) => a + b, 0)
    )
  })

  it("caches counts per message, so a growing history costs only its new messages", () => {
    const counter = Tokens.makeCounter()
    const history: Array<Prompt.MessageEncoded> = Array.from({ length: 200 }, (_, i) => ({
      role: "user" as const,
      content: [{ type: "text" as const, text: observation(i, 400) }]
    }))
    const first = counter.messages(history)
    expect(counter.stats().misses).toBe(200)
    history.push({ role: "user", content: "one more" })
    const second = counter.messages(history)
    expect(second).toBe(first + Tokens.MESSAGE_OVERHEAD + 2)
    expect(counter.stats().misses).toBe(201)
    // an equal message (another object with the same JSON) is found by its JSON
    const copy = JSON.parse(JSON.stringify(history[7]))
    expect(counter.message(copy)).toBe(counter.message(history[7]!))
    expect(counter.stats().misses).toBe(201)
    // a changed message is counted again
    counter.message({ role: "user", content: [{ type: "text", text: "changed" }] })
    expect(counter.stats().misses).toBe(202)
  })
})
