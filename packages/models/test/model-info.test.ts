import { Response } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { ModelInfo } from "../src/index.js"

describe("ModelInfo", () => {
  it("context windows for each provider's models, by id, spec, dated id, gateway id or local tag", () => {
    expect(ModelInfo.contextWindow("anthropic/claude-sonnet-4-5")).toBe(200_000)
    expect(ModelInfo.contextWindow("claude-sonnet-4-5-20250929")).toBe(200_000)
    expect(ModelInfo.contextWindow("openrouter/anthropic/claude-sonnet-4.5")).toBe(200_000)
    expect(ModelInfo.contextWindow("openai/gpt-4.1-mini")).toBe(1_047_576)
    expect(ModelInfo.contextWindow("gpt-4o-mini-2024-07-18")).toBe(128_000)
    expect(ModelInfo.lookup("gpt-4o-2024-08-06")?.id).toBe("gpt-4o")
    expect(ModelInfo.lookup("o3-mini-2025-01-31")?.id).toBe("o3-mini")
    expect(ModelInfo.lookup("gpt-5-mini")?.id).toBe("gpt-5-mini")
    expect(ModelInfo.contextWindow("google/gemini-2.5-pro")).toBe(1_048_576)
    expect(ModelInfo.contextWindow("ollama/qwen2.5-coder:7b")).toBe(32_768)
    expect(ModelInfo.contextWindow("llama-api/Llama-3.3-70B-Instruct")).toBe(131_072)
    expect(ModelInfo.contextWindow("vllm/meta-llama/Llama-3.1-8B-Instruct")).toBe(131_072)
  })

  it("unknown models get a conservative default and no price", () => {
    expect(ModelInfo.lookup("acme/brand-new-model")).toBeUndefined()
    expect(ModelInfo.contextWindow("acme/brand-new-model")).toBe(ModelInfo.defaultContextWindow)
    expect(ModelInfo.defaultContextWindow).toBeLessThanOrEqual(32_768)
    expect(ModelInfo.maxOutputTokens("acme/brand-new-model")).toBe(ModelInfo.defaultMaxOutputTokens)
    expect(ModelInfo.cost("acme/brand-new-model", { inputTokens: 1000, outputTokens: 1000 })).toBeUndefined()
    expect(ModelInfo.cost("ollama/llama3.2", { inputTokens: 1000, outputTokens: 1000 })).toBeUndefined()
    // a prefix must end at a separator: "gpt-4" is not "gpt-4o"
    expect(ModelInfo.lookup("gpt-4")).toBeUndefined()
  })

  it("cost: input, cached input and output at list prices", () => {
    expect(
      ModelInfo.cost("openai/gpt-4.1-mini", { inputTokens: 1_000_000, outputTokens: 0, cachedInputTokens: 0 })
    ).toBe(0.4)
    // 1M input of which 600k cached, 100k output on Sonnet 4.5: 0.4*3 + 0.6*0.3 + 0.1*15
    expect(
      ModelInfo.cost("anthropic/claude-sonnet-4-5", {
        inputTokens: 1_000_000,
        cachedInputTokens: 600_000,
        outputTokens: 100_000
      })
    ).toBe(2.88)
    const usage = new Response.Usage({
      inputTokens: 4000,
      outputTokens: 350,
      totalTokens: 4350,
      cachedInputTokens: 2048,
      reasoningTokens: 250
    })
    // (4000-2048)*0.3 + 2048*0.075 + 350*2.5, per million
    expect(ModelInfo.cost("google/gemini-2.5-flash", usage)).toBeCloseTo(0.0016142, 9)
  })

  it("one table: every provider present, ids unique, numbers sane", () => {
    const ids = ModelInfo.table.map((r) => r.id)
    expect(new Set(ids).size).toBe(ids.length)
    for (const family of ["openai", "anthropic", "google", "open"] as const) {
      expect(ModelInfo.table.some((r) => r.family === family)).toBe(true)
    }
    for (const r of ModelInfo.table) {
      expect(Number.isInteger(r.contextWindow) && r.contextWindow > 0).toBe(true)
      expect(r.maxOutputTokens).toBeLessThanOrEqual(r.contextWindow)
      if (r.pricing) {
        expect(r.pricing.input).toBeGreaterThan(0)
        expect(r.pricing.output).toBeGreaterThanOrEqual(r.pricing.input)
        if (r.pricing.cachedInput !== undefined) expect(r.pricing.cachedInput).toBeLessThan(r.pricing.input)
      }
    }
  })
})
