import { Chat, LanguageModel, type Response, Tool, Toolkit } from "@effect/ai"
import { Chunk, Effect, Schema, Stream } from "effect"
import { Models } from "../../src/index.js"
import type { FakeServer } from "./FakeServer.js"

export const ReadFile = Tool.make("read_file", {
  description: "Read a file from the workspace",
  parameters: { path: Schema.String, maxBytes: Schema.optional(Schema.Number) },
  success: Schema.Struct({ content: Schema.String }),
  failure: Schema.Struct({ message: Schema.String }),
  failureMode: "return"
})

export const Tools = Toolkit.make(ReadFile)

/** The toolkit's handlers; `calls` receives the parameters of every call. */
export const toolsLayer = (calls: Array<unknown>) =>
  Tools.toLayer({
    read_file: (params) =>
      Effect.sync(() => {
        calls.push(params)
        return { content: "# Hello\n" }
      })
  })

export const env = {
  OPENAI_API_KEY: "sk-test-openai",
  ANTHROPIC_API_KEY: "sk-ant-test",
  GEMINI_API_KEY: "gemini-test",
  OLLAMA_API_KEY: undefined
}

/** Fast retry settings for tests. */
export const fast = {
  maxRetries: 2,
  retryBaseDelay: "5 millis",
  retryMaxDelay: "300 millis",
  timeout: "5 seconds",
  idleTimeout: "5 seconds"
} as const

export const modelLayer = (spec: string, server: FakeServer, path = "", extra: Models.Options = {}) =>
  Models.layer(spec, { env, baseUrl: server.url + path, ...fast, ...extra })

/** Two turns through Chat: the model asks for read_file, the handler runs, the result goes back. */
export const toolRoundTrip = Effect.gen(function* () {
  const chat = yield* Chat.fromPrompt([{ role: "system", content: "You are a test." }])
  const first = yield* chat.generateText({ prompt: "Read README.md", toolkit: Tools })
  const second = yield* chat.generateText({ prompt: [], toolkit: Tools })
  return { first, second }
})

/** The same round trip, streamed. */
export const streamedToolRoundTrip = Effect.gen(function* () {
  const chat = yield* Chat.fromPrompt([{ role: "system", content: "You are a test." }])
  const first = yield* chat.streamText({ prompt: "Read README.md", toolkit: Tools }).pipe(Stream.runCollect)
  const second = yield* chat.streamText({ prompt: [], toolkit: Tools }).pipe(Stream.runCollect)
  return { first: Chunk.toArray(first), second: Chunk.toArray(second) }
})

/** Streams a plain prompt and returns the text deltas and the finish part. */
export const streamText = (prompt = "Say hello") =>
  LanguageModel.streamText({ prompt }).pipe(
    Stream.runCollect,
    Effect.map((chunk) => {
      const parts = Chunk.toArray(chunk) as Array<Response.StreamPart<{}>>
      const deltas = parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : []))
      const finish = parts.find((p) => p.type === "finish") as Response.FinishPart | undefined
      return { parts, deltas, text: deltas.join(""), finish }
    })
  )

export const usageOf = (u: Response.Usage | undefined) =>
  u === undefined
    ? undefined
    : {
        inputTokens: u.inputTokens,
        outputTokens: u.outputTokens,
        totalTokens: u.totalTokens,
        cachedInputTokens: u.cachedInputTokens,
        reasoningTokens: u.reasoningTokens
      }

export const messageOf = (e: unknown) => (e as { message: string }).message
