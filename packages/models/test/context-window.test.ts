import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { OpenAiCompatible } from "../src/index.js"
import * as Fake from "./support/FakeServer.js"

// The context window as local servers report it, each in its own format (captured from their docs):
// vLLM `GET /v1/models` max_model_len; llama.cpp `GET /props` default_generation_settings.n_ctx and
// `GET /v1/models` meta.n_ctx_train; Ollama `POST /api/show` num_ctx / <arch>.context_length;
// LM Studio `GET /api/v0/models/{id}` loaded_context_length / max_context_length.

const ask = (server: Fake.FakeServer, provider: string, model = "m") =>
  OpenAiCompatible.contextWindow({ model, apiUrl: `${server.url}/v1`, provider }).pipe(
    Effect.provide(NodeHttpClient.layerUndici)
  )

const notFound = Fake.json(404, { error: "not found" })

describe("OpenAiCompatible.contextWindow", () => {
  it.scoped("vLLM: max_model_len of the model's entry", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, {
          object: "list",
          data: [
            { id: "other", object: "model", max_model_len: 4096 },
            { id: "Qwen/Qwen3-Coder", object: "model", max_model_len: 262_144 }
          ]
        })
      )
      const w = yield* ask(server, "vllm", "Qwen/Qwen3-Coder")
      expect(Option.getOrThrow(w)).toEqual({ tokens: 262_144, source: `${server.url}/v1/models (max_model_len)` })
      expect(server.requests.map((r) => `${r.method} ${r.url}`)).toEqual(["GET /v1/models"])
    })
  )

  it.scoped("llama.cpp: n_ctx from /props, else n_ctx_train from /v1/models", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(200, { default_generation_settings: { n_ctx: 16_384 }, total_slots: 1 }))
      expect(Option.getOrThrow(yield* ask(server, "llamacpp")).tokens).toBe(16_384)
      server.reply(
        notFound,
        Fake.json(200, {
          object: "list",
          data: [{ id: "model.gguf", object: "model", meta: { n_ctx_train: 131_072, n_vocab: 128_256 } }]
        })
      )
      const w = yield* ask(server, "llamacpp", "model.gguf")
      expect(Option.getOrThrow(w)).toEqual({ tokens: 131_072, source: `${server.url}/v1/models (meta.n_ctx_train)` })
      expect(server.requests.map((r) => `${r.method} ${r.url}`)).toEqual(["GET /props", "GET /props", "GET /v1/models"])
    })
  )

  it.scoped("Ollama: num_ctx from the model's parameters, else <arch>.context_length", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, {
          parameters: 'num_ctx                        65536\nstop                           "<|im_end|>"',
          model_info: { "general.architecture": "qwen2", "qwen2.context_length": 32_768 }
        }),
        Fake.json(200, {
          parameters: "",
          model_info: { "general.architecture": "llama", "llama.context_length": 131_072 }
        })
      )
      expect(Option.getOrThrow(yield* ask(server, "ollama", "qwen2.5-coder:7b")).tokens).toBe(65_536)
      const w = Option.getOrThrow(yield* ask(server, "ollama", "llama3.2"))
      expect(w).toEqual({ tokens: 131_072, source: `${server.url}/api/show (llama.context_length)` })
      expect(server.requests.map((r) => [r.method, r.url, r.body?.model])).toEqual([
        ["POST", "/api/show", "qwen2.5-coder:7b"],
        ["POST", "/api/show", "llama3.2"]
      ])
    })
  )

  it.scoped("LM Studio: the loaded context, else the model's maximum", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, { id: "qwen2.5-7b-instruct", max_context_length: 32_768, loaded_context_length: 8192 }),
        Fake.json(200, { id: "qwen2.5-7b-instruct", max_context_length: 32_768 })
      )
      expect(Option.getOrThrow(yield* ask(server, "lmstudio", "qwen2.5-7b-instruct")).tokens).toBe(8192)
      expect(Option.getOrThrow(yield* ask(server, "lmstudio", "qwen2.5-7b-instruct")).tokens).toBe(32_768)
      expect(server.requests[0]!.url).toBe("/api/v0/models/qwen2.5-7b-instruct")
    })
  )

  it.scopedLive("a server that says nothing, errs or hangs: None, never a failure", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(200, { object: "list", data: [] }), Fake.text(500, "oops"))
      expect(Option.isNone(yield* ask(server, "openai-compatible"))).toBe(true)
      server.reply(Fake.hang)
      const hung = yield* OpenAiCompatible.contextWindow({
        model: "m",
        apiUrl: `${server.url}/v1`,
        provider: "vllm",
        timeout: "200 millis"
      }).pipe(Effect.provide(NodeHttpClient.layerUndici))
      expect(Option.isNone(hung)).toBe(true)
    })
  )
})
