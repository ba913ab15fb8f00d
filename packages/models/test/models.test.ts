import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Either, Inspectable, Layer, Redacted, Schema, Stream } from "effect"
import { Models, Provider } from "../src/index.js"
import * as Fake from "./support/FakeServer.js"
import { fast, messageOf } from "./support/harness.js"

const resolved = (spec: string, options: Models.Options = {}) => {
  const r = Models.resolve(spec, options)
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right
}

const problem = (spec: string, options: Models.Options = {}) => {
  const r = Models.resolve(spec, options)
  if (Either.isRight(r)) throw new Error(`expected an error for ${spec}`)
  return r.left
}

const buildError = (spec: string, options: Models.Options) =>
  Layer.build(Models.layer(spec, options)).pipe(Effect.flip, Effect.scoped)

describe("Models.resolve", () => {
  it("a missing key is a typed error whose message names the variable", () => {
    const e = problem("anthropic/claude-sonnet-4-5", { env: {} })
    expect(e._tag).toBe("ModelConfigError")
    expect(e.reason).toBe("MissingApiKey")
    expect(e.variable).toBe("ANTHROPIC_API_KEY")
    expect(e.message).toBe("ANTHROPIC_API_KEY is not set: export it, or pick another model with --model.")
    expect(problem("openai/gpt-4.1", { env: { OPENAI_API_KEY: "  " } }).message).toBe(
      "OPENAI_API_KEY is not set: export it, or pick another model with --model."
    )
    expect(problem("google/gemini-2.5-pro", { env: {} }).message).toBe(
      "GEMINI_API_KEY (or GOOGLE_API_KEY) is not set: export it, or pick another model with --model."
    )
    expect(problem("openrouter/x/y", { env: {} }).message).toBe(
      "OPENROUTER_API_KEY is not set: export it, or pick another model with --model."
    )
    expect(problem("llama-api/Llama-4-Maverick-17B-128E-Instruct-FP8", { env: {} }).message).toBe(
      "LLAMA_API_KEY is not set: export it, or pick another model with --model."
    )
  })

  it("keys come from the environment (GEMINI_API_KEY or GOOGLE_API_KEY), or the apiKey option", () => {
    const g = resolved("google/gemini-2.5-flash", { env: { GOOGLE_API_KEY: "g-key" } })
    expect(g.apiKeyVariable).toBe("GOOGLE_API_KEY")
    expect(Redacted.value(g.apiKey!)).toBe("g-key")
    const both = resolved("google/gemini-2.5-flash", { env: { GOOGLE_API_KEY: "b", GEMINI_API_KEY: "a" } })
    expect(Redacted.value(both.apiKey!)).toBe("a")
    const opt = resolved("anthropic/claude-haiku-4-5", { env: {}, apiKey: "sk-ant-opt" })
    expect(opt.apiKeyVariable).toBe("option")
    expect(String(opt.apiKey)).not.toContain("sk-ant-opt") // redacted when printed
  })

  it("an unknown provider lists the known ones", () => {
    const e = problem("foo/bar", { env: {} })
    expect(e.reason).toBe("UnknownProvider")
    expect(e.message).toBe(
      "Unknown model provider 'foo' in 'foo/bar': known providers are openai, anthropic, google, openai-compatible, ollama, vllm, llamacpp, lmstudio, openrouter, llama-api."
    )
  })

  it("bare model ids: inferred for unambiguous families, a clear error otherwise", () => {
    expect(resolved("gpt-4.1-mini", { env: { OPENAI_API_KEY: "k" } }).provider.name).toBe("openai")
    expect(resolved("o4-mini", { env: { OPENAI_API_KEY: "k" } }).provider.name).toBe("openai")
    expect(resolved("claude-sonnet-4-5", { env: { ANTHROPIC_API_KEY: "k" } }).provider.name).toBe("anthropic")
    expect(resolved("gemini-2.5-pro", { env: { GEMINI_API_KEY: "k" } }).provider.name).toBe("google")
    const e = problem("llama3.2", { env: {} })
    expect(e.reason).toBe("InvalidSpec")
    expect(e.message).toMatch(
      /^'llama3\.2' does not name a provider: write provider\/model, e\.g\. ollama\/llama3\.2 \(known providers: openai, /
    )
    expect(problem("ollama/", { env: {} }).message).toBe("'ollama/' names no model: write ollama/<model>.")
    expect(problem("  ", { env: {} }).reason).toBe("InvalidSpec")
  })

  it("presets: local servers need no key and have default URLs; model ids keep their slashes and tags", () => {
    const table: Array<[string, string]> = [
      ["ollama/llama3.2", "http://127.0.0.1:11434/v1"],
      ["vllm/Qwen/Qwen2.5-Coder-32B-Instruct", "http://127.0.0.1:8000/v1"],
      ["llamacpp/default", "http://127.0.0.1:8080/v1"],
      ["lmstudio/qwen2.5-7b-instruct", "http://127.0.0.1:1234/v1"]
    ]
    for (const [spec, url] of table) {
      const r = resolved(spec, { env: {} })
      expect(r.baseUrl).toBe(url)
      expect(r.apiKey).toBeUndefined()
      expect(r.provider.api).toBe("openai-compatible")
    }
    expect(resolved("vllm/Qwen/Qwen2.5-Coder-32B-Instruct", { env: {} }).model).toBe("Qwen/Qwen2.5-Coder-32B-Instruct")
    expect(resolved("ollama/qwen2.5-coder:7b", { env: {} }).model).toBe("qwen2.5-coder:7b")
    expect(resolved("openrouter/anthropic/claude-sonnet-4.5", { env: { OPENROUTER_API_KEY: "k" } }).baseUrl).toBe(
      "https://openrouter.ai/api/v1"
    )
    expect(resolved("llama-api/Llama-3.3-70B-Instruct", { env: { LLAMA_API_KEY: "k" } }).baseUrl).toBe(
      "https://api.llama.com/compat/v1"
    )
    expect(resolved("llama.cpp/x", { env: {} }).provider.name).toBe("llamacpp")
    expect(resolved("gemini/gemini-2.5-flash", { env: { GEMINI_API_KEY: "k" } }).provider.name).toBe("google")
    expect(Provider.names).toEqual([
      "openai",
      "anthropic",
      "google",
      "openai-compatible",
      "ollama",
      "vllm",
      "llamacpp",
      "lmstudio",
      "openrouter",
      "llama-api"
    ])
  })

  it("base URL: option > provider variable > MUSE_BASE_URL > default, normalized per provider", () => {
    const env = { ANTHROPIC_API_KEY: "k", OPENAI_API_KEY: "k", GEMINI_API_KEY: "k" }
    expect(resolved("anthropic/claude-sonnet-4-5", { env }).baseUrl).toBe("https://api.anthropic.com")
    expect(
      resolved("anthropic/claude-sonnet-4-5", { env: { ...env, ANTHROPIC_BASE_URL: "https://proxy.example/v1/" } })
    ).toMatchObject({
      baseUrl: "https://proxy.example",
      baseUrlSource: "ANTHROPIC_BASE_URL"
    })
    expect(
      resolved("google/gemini-2.5-flash", { env: { ...env, GOOGLE_BASE_URL: "https://g.example/v1beta" } }).baseUrl
    ).toBe("https://g.example")
    expect(resolved("openai/gpt-4.1", { env: { ...env, MUSE_BASE_URL: "https://muse.example/v1" } })).toMatchObject({
      baseUrl: "https://muse.example/v1",
      baseUrlSource: "MUSE_BASE_URL"
    })
    expect(
      resolved("openai/gpt-4.1", {
        env: { ...env, MUSE_BASE_URL: "https://muse.example/v1", OPENAI_BASE_URL: "https://oa.example/v1" }
      }).baseUrl
    ).toBe("https://oa.example/v1")
    expect(
      resolved("openai/gpt-4.1", {
        env: { ...env, OPENAI_BASE_URL: "https://oa.example/v1" },
        baseUrl: "https://option.example/v1"
      })
    ).toMatchObject({ baseUrl: "https://option.example/v1", baseUrlSource: "option" })
    expect(resolved("ollama/llama3.2", { env: { OLLAMA_BASE_URL: "http://gpu-box:11434/v1" } }).baseUrl).toBe(
      "http://gpu-box:11434/v1"
    )
  })

  it("openai-compatible needs a URL; a bad URL names where it came from", () => {
    expect(problem("openai-compatible/my-model", { env: {} }).message).toBe(
      "openai-compatible needs a server URL: set OPENAI_COMPATIBLE_BASE_URL (or MUSE_BASE_URL), or use a preset such as ollama/my-model."
    )
    expect(
      resolved("openai-compatible/my-model", { env: { OPENAI_COMPATIBLE_BASE_URL: "http://10.0.0.5:9000/v1" } }).baseUrl
    ).toBe("http://10.0.0.5:9000/v1")
    expect(problem("ollama/llama3.2", { env: { OLLAMA_BASE_URL: "localhost:11434" } }).message).toBe(
      "OLLAMA_BASE_URL is not an http(s) URL: 'localhost:11434'."
    )
    expect(problem("ollama/llama3.2", { env: {}, baseUrl: "nope" }).message).toBe(
      "The baseUrl option is not an http(s) URL: 'nope'."
    )
  })

  it("a hosted provider pointed at a server on this machine does not insist on a key", () => {
    const r = resolved("openai/gpt-4.1", { env: { OPENAI_BASE_URL: "http://127.0.0.1:4000/v1" } })
    expect(r.apiKey).toBeUndefined()
  })
})

describe("Models.layer", () => {
  it.scopedLive("layer build fails with the ModelConfigError (missing key, unknown provider)", () =>
    Effect.gen(function* () {
      const e = yield* buildError("anthropic/claude-sonnet-4-5", { env: {} })
      expect(e).toBeInstanceOf(Models.ModelConfigError)
      expect(e.message).toBe("ANTHROPIC_API_KEY is not set: export it, or pick another model with --model.")
      const u = yield* buildError("mistralai/mistral-large", { env: {} })
      expect(u.reason).toBe("UnknownProvider")
    })
  )

  it.scopedLive("MUSE_BASE_URL reaches an openai-compatible server end to end", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, {
          id: "c1",
          object: "chat.completion",
          created: 1,
          model: "my-model",
          choices: [{ index: 0, message: { role: "assistant", content: "pong" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 }
        })
      )
      const res = yield* LanguageModel.generateText({ prompt: "ping" }).pipe(
        Effect.provide(
          Models.layer("openai-compatible/my-model", {
            env: { MUSE_BASE_URL: `${server.url}/v1`, OPENAI_COMPATIBLE_API_KEY: "sk-compat" },
            ...fast
          })
        )
      )
      expect(res.text).toBe("pong")
      expect(server.requests[0]!.url).toBe("/v1/chat/completions")
      expect(server.requests[0]!.headers.authorization).toBe("Bearer sk-compat")
    })
  )

  it.scopedLive("openai: a tool whose parameters are all required is sent strict; options pass through", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(400, { error: { message: "stop here", type: "invalid_request_error" } }))
      const Grep = Tool.make("grep", {
        description: "Search",
        parameters: { pattern: Schema.String, path: Schema.NullOr(Schema.String) },
        success: Schema.String
      })
      const kit = Toolkit.make(Grep)
      const error = yield* LanguageModel.generateText({ prompt: "find", toolkit: kit }).pipe(
        Effect.provide(kit.toLayer({ grep: () => Effect.succeed("") })),
        Effect.provide(
          Models.layer("openai/gpt-5", {
            env: { OPENAI_API_KEY: "k" },
            baseUrl: `${server.url}/v1`,
            maxOutputTokens: 2000,
            config: { prompt_cache_key: "worker-1" },
            ...fast
          })
        ),
        Effect.flip
      )
      expect(messageOf(error)).toBe("openai rejected the request (400): stop here.")
      const body = server.requests[0]!.body
      expect(body.tools[0].strict).toBe(true)
      expect(body.max_output_tokens).toBe(2000)
      expect(body.prompt_cache_key).toBe("worker-1")
    })
  )

  it.scopedLive("errors never carry the API key (invariant: secrets never enter the log)", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const cases: Array<[string, string, string, Record<string, string>]> = [
        ["openai/gpt-4.1", "/v1", "sk-secret-openai", { OPENAI_API_KEY: "sk-secret-openai" }],
        ["anthropic/claude-haiku-4-5", "", "sk-ant-secret", { ANTHROPIC_API_KEY: "sk-ant-secret" }],
        ["google/gemini-2.5-flash", "", "AIza-secret", { GEMINI_API_KEY: "AIza-secret" }],
        ["openrouter/x/y", "/api/v1", "sk-or-secret", { OPENROUTER_API_KEY: "sk-or-secret" }]
      ]
      for (const [spec, path, key, env] of cases) {
        server.reply(Fake.json(401, { error: { message: "nope" } }))
        const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
          Effect.provide(Models.layer(spec, { env, baseUrl: server.url + path, ...fast })),
          Effect.flip
        )
        expect(server.requests.at(-1)!.raw).not.toContain(key)
        expect(JSON.stringify(error)).not.toContain(key)
        expect(Inspectable.format(error)).not.toContain(key)
        expect(Cause.pretty(Cause.fail(error))).not.toContain(key)
      }
      // a stream cut mid-way (the failed body read is not kept as a "body")
      const cutOnce = () =>
        Fake.sse(
          [
            {
              data: {
                id: "c",
                object: "chat.completion.chunk",
                created: 1,
                model: "m",
                choices: [{ index: 0, delta: { content: "a" } }]
              }
            }
          ],
          { dropAfter: 1 }
        )
      server.reply(cutOnce(), cutOnce())
      const dropped = yield* LanguageModel.streamText({ prompt: "hi" }).pipe(
        Stream.runDrain,
        Effect.provide(
          Models.layer("openrouter/x/y", {
            env: { OPENROUTER_API_KEY: "sk-or-secret" },
            baseUrl: `${server.url}/api/v1`,
            ...fast
          })
        ),
        Effect.flip
      )
      expect(messageOf(dropped)).toBe("the connection to openrouter dropped mid-response.")
      expect(JSON.stringify(dropped)).not.toContain("sk-or-secret")
      expect(Inspectable.format(dropped)).not.toContain("sk-or-secret")
      // a transport error (timeout) too
      server.reply(Fake.hang)
      const timeout = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(
          Models.layer("openrouter/x/y", {
            env: { OPENROUTER_API_KEY: "sk-or-secret" },
            baseUrl: `${server.url}/api/v1`,
            ...fast,
            maxRetries: 0,
            timeout: "100 millis"
          })
        ),
        Effect.flip
      )
      expect(messageOf(timeout)).toBe("openrouter did not respond within 100ms.")
      expect(JSON.stringify(timeout)).not.toContain("sk-or-secret")
      expect(Inspectable.format(timeout)).not.toContain("sk-or-secret")
    })
  )
})
