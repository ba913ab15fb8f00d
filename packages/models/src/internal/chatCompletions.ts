import { AiError, IdGenerator, type LanguageModel, type Prompt, type Response, Tool } from "@effect/ai"
import { Chunk, Effect, Encoding } from "effect"
import { piecesBetween, textOf } from "./joinJson.js"

// ---------------------------------------------------------------------------------------------
// Wire types (the subset of the Chat Completions format this adapter reads and writes)

export interface ChatToolCall {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

export type ChatContentPart =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image_url"; readonly image_url: { readonly url: string } }
  | { readonly type: "file"; readonly file: { readonly filename?: string; readonly file_data: string } }

export type ChatMessage =
  | { readonly role: "system"; readonly content: string }
  | { readonly role: "user"; readonly content: string | ReadonlyArray<ChatContentPart> }
  | {
      readonly role: "assistant"
      readonly content: string | null
      readonly tool_calls?: ReadonlyArray<ChatToolCall>
    }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

export interface ChatUsage {
  readonly prompt_tokens?: number | null
  readonly completion_tokens?: number | null
  readonly total_tokens?: number | null
  readonly prompt_tokens_details?: { readonly cached_tokens?: number | null } | null
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number | null } | null
  /** DeepSeek's name for cached prompt tokens. */
  readonly prompt_cache_hit_tokens?: number | null
}

// ---------------------------------------------------------------------------------------------
// Prompt → messages

const fileData = (part: Prompt.FilePart): string => {
  const d = part.data
  if (d instanceof URL) return d.toString()
  if (typeof d === "string") {
    if (/^(https?:|data:)/.test(d)) return d
    return `data:${part.mediaType};base64,${d}`
  }
  return `data:${part.mediaType};base64,${Encoding.encodeBase64(d)}`
}

const resultText = (part: Prompt.ToolResultPart): string => {
  const body = typeof part.result === "string" ? part.result : JSON.stringify(part.result ?? null)
  return part.isFailure ? `Error: ${body}` : body
}

/** Appends the Chat Completions messages for one prompt message to `messages`. */
const pushMessages = (messages: Array<ChatMessage>, message: Prompt.Message): void => {
  switch (message.role) {
    case "system": {
      messages.push({ role: "system", content: message.content })
      break
    }
    case "user": {
      const parts: Array<ChatContentPart> = []
      for (const part of message.content) {
        if (part.type === "text") parts.push({ type: "text", text: part.text })
        else if (part.mediaType.startsWith("image/"))
          parts.push({ type: "image_url", image_url: { url: fileData(part) } })
        else
          parts.push({
            type: "file",
            file: part.fileName ? { filename: part.fileName, file_data: fileData(part) } : { file_data: fileData(part) }
          })
      }
      const onlyText = parts.every((p) => p.type === "text")
      messages.push({
        role: "user",
        content: onlyText ? parts.map((p) => (p as { text: string }).text).join("\n") : parts
      })
      break
    }
    case "assistant": {
      let text = ""
      const toolCalls: Array<ChatToolCall> = []
      for (const part of message.content) {
        if (part.type === "text") text += part.text
        else if (part.type === "tool-call" && !part.providerExecuted)
          toolCalls.push({
            id: part.id,
            type: "function",
            function: { name: part.name, arguments: JSON.stringify(part.params ?? {}) }
          })
      }
      if (toolCalls.length > 0)
        messages.push({ role: "assistant", content: text === "" ? null : text, tool_calls: toolCalls })
      else messages.push({ role: "assistant", content: text })
      break
    }
    case "tool": {
      for (const part of message.content)
        messages.push({ role: "tool", tool_call_id: part.id, content: resultText(part) })
      break
    }
  }
}

/** Converts a Prompt into Chat Completions messages (tool calls and tool results included). */
export const toMessages = (prompt: Prompt.Prompt): Array<ChatMessage> => {
  const messages: Array<ChatMessage> = []
  for (const message of prompt.content) pushMessages(messages, message)
  return messages
}

/**
 * Each prompt message's wire JSON, encoded once: a session sends the same history again with
 * every request, and its messages are the same (immutable) objects each time.
 */
const wireJson = new WeakMap<Prompt.Message, string>()

/** Each message's wire JSON (the messages' JSON texts, without the array's brackets), encoded once. */
export const messagesParts = (prompt: Prompt.Prompt): Array<string> => {
  const parts: Array<string> = []
  for (const message of prompt.content) {
    let json = wireJson.get(message)
    if (json === undefined) {
      const out: Array<ChatMessage> = []
      pushMessages(out, message)
      json = out.map((m) => JSON.stringify(m)).join(",")
      wireJson.set(message, json)
    }
    if (json !== "") parts.push(json)
  }
  return parts
}

/** `JSON.stringify(toMessages(prompt))`, encoding only the messages not seen before. */
export const messagesJson = (prompt: Prompt.Prompt): string => `[${messagesParts(prompt).join(",")}]`

/**
 * The JSON text of `{ ...head, messages, ...tail }` with the messages given as JSON text (or as the
 * parts of `messagesParts`) — the same bytes as `JSON.stringify` of that object.
 */
export const requestJson = (
  head: Readonly<Record<string, unknown>>,
  messages: string | ReadonlyArray<string>,
  tail: Readonly<Record<string, unknown>>
): string => textOf(requestPieces(head, messages, tail))

/** `requestJson`'s text in pieces (see `joinJson.ts`): the history's messages are pieces of their own. */
export const requestPieces = (
  head: Readonly<Record<string, unknown>>,
  messages: string | ReadonlyArray<string>,
  tail: Readonly<Record<string, unknown>>
): Array<string> => {
  // a key of `tail` (or `messages`) already in `head` keeps head's place: leave that rare case to JSON.stringify
  if ("messages" in head || Object.keys(tail).some((k) => k in head)) {
    const text = typeof messages === "string" ? messages : `[${messages.join(",")}]`
    return [JSON.stringify({ ...head, messages: JSON.parse(text), ...tail })]
  }
  const h = JSON.stringify(head)
  const t = JSON.stringify(tail)
  const prefix = `${h.length > 2 ? `${h.slice(0, -1)},` : "{"}"messages":`
  const suffix = t.length > 2 ? `,${t.slice(1)}` : "}"
  if (typeof messages === "string") return [prefix, messages, suffix]
  return piecesBetween(`${prefix}[`, messages, `]${suffix}`)
}

/** Each tool's wire form, built once (its JSON schema takes a walk over the tool's schema). */
const toolWire = new WeakMap<object, object>()

/** The `tools`, `tool_choice` and `response_format` fields of a request. */
export const toolFields = (options: LanguageModel.ProviderOptions): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  if (options.responseFormat.type === "json") {
    out.response_format = {
      type: "json_schema",
      json_schema: {
        name: options.responseFormat.objectName,
        schema: Tool.getJsonSchemaFromSchemaAst(options.responseFormat.schema.ast),
        strict: false
      }
    }
  }
  let tools = options.tools.filter((tool) => Tool.isUserDefined(tool))
  let choice: unknown = options.toolChoice
  if (typeof options.toolChoice === "object") {
    if ("tool" in options.toolChoice) choice = { type: "function", function: { name: options.toolChoice.tool } }
    else {
      const allowed = new Set<string>(options.toolChoice.oneOf)
      tools = tools.filter((tool) => allowed.has(tool.name))
      choice = options.toolChoice.mode === "required" ? "required" : "auto"
    }
  }
  if (tools.length === 0) return out
  out.tools = tools.map((tool) => {
    let wire = toolWire.get(tool)
    if (wire === undefined) {
      const description = Tool.getDescription(tool as any)
      wire = {
        type: "function",
        function: {
          name: tool.name,
          ...(description ? { description } : {}),
          parameters: Tool.getJsonSchema(tool as any)
        }
      }
      toolWire.set(tool, wire)
    }
    return wire
  })
  out.tool_choice = choice
  return out
}

// ---------------------------------------------------------------------------------------------
// Response → parts

export const toUsage = (usage: ChatUsage | null | undefined): typeof Response.Usage.Encoded => {
  const input = usage?.prompt_tokens ?? undefined
  const output = usage?.completion_tokens ?? undefined
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? usage?.prompt_cache_hit_tokens ?? undefined
  const reasoning = usage?.completion_tokens_details?.reasoning_tokens ?? undefined
  return {
    inputTokens: input,
    outputTokens: output,
    totalTokens:
      usage?.total_tokens ?? (input !== undefined || output !== undefined ? (input ?? 0) + (output ?? 0) : undefined),
    ...(cached !== undefined ? { cachedInputTokens: cached } : {}),
    ...(reasoning !== undefined ? { reasoningTokens: reasoning } : {})
  }
}

export const toFinishReason = (reason: unknown, hasToolCalls: boolean): Response.FinishReason => {
  switch (reason) {
    case "stop":
    case "eos":
    case "end_turn":
      return hasToolCalls ? "tool-calls" : "stop"
    case "length":
    case "max_tokens":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool-calls"
    case "content_filter":
      return "content-filter"
    case "error":
      return "error"
    case null:
    case undefined:
      return hasToolCalls ? "tool-calls" : "unknown"
    default:
      return "other"
  }
}

const isRecord = (u: unknown): u is Record<string, any> => typeof u === "object" && u !== null && !Array.isArray(u)

export const parseArguments = (
  module: string,
  method: string,
  provider: string,
  toolName: string,
  args: string
): Effect.Effect<unknown, AiError.MalformedOutput> =>
  Effect.try({
    try: () => Tool.unsafeSecureJsonParse(args.trim() === "" ? "{}" : args),
    catch: (cause) =>
      new AiError.MalformedOutput({
        module,
        method,
        description:
          `${provider} returned malformed JSON arguments for tool '${toolName}': ` +
          JSON.stringify(args.length > 200 ? args.slice(0, 200) + "…" : args),
        cause
      })
  })

const metadataPart = (body: Record<string, any>): Response.ResponseMetadataPartEncoded => {
  const part: { type: "response-metadata"; id?: string; modelId?: string; timestamp?: string } = {
    type: "response-metadata"
  }
  if (typeof body.id === "string") part.id = body.id
  if (typeof body.model === "string") part.modelId = body.model
  if (typeof body.created === "number") part.timestamp = new Date(body.created * 1000).toISOString()
  return part
}

/** Turns a non-streamed `chat.completion` body into response parts. */
export const fromCompletion = (
  provider: string,
  body: unknown
): Effect.Effect<Array<Response.PartEncoded>, AiError.AiError, IdGenerator.IdGenerator> =>
  Effect.gen(function* () {
    const module = "OpenAiCompatible"
    const method = "generateText"
    if (!isRecord(body) || !Array.isArray(body.choices)) {
      if (isRecord(body) && body.error !== undefined) {
        return yield* new AiError.UnknownError({
          module,
          method,
          description: `${provider} reported an error: ${errorText(body.error)}`
        })
      }
      return yield* new AiError.MalformedOutput({
        module,
        method,
        description: `${provider} sent a response without 'choices': ${JSON.stringify(body).slice(0, 200)}`
      })
    }
    const ids = yield* IdGenerator.IdGenerator
    const parts: Array<Response.PartEncoded> = [metadataPart(body)]
    const choice = body.choices[0]
    const message = isRecord(choice) && isRecord(choice.message) ? choice.message : {}
    const reasoning = message.reasoning_content ?? message.reasoning
    if (typeof reasoning === "string" && reasoning !== "") parts.push({ type: "reasoning", text: reasoning })
    if (typeof message.content === "string" && message.content !== "")
      parts.push({ type: "text", text: message.content })
    const toolCalls: Array<unknown> = Array.isArray(message.tool_calls) ? message.tool_calls : []
    for (const call of toolCalls) {
      if (!isRecord(call) || !isRecord(call.function) || typeof call.function.name !== "string") {
        return yield* new AiError.MalformedOutput({
          module,
          method,
          description: `${provider} sent a tool call without a function name: ${JSON.stringify(call).slice(0, 200)}`
        })
      }
      const name: string = call.function.name
      const rawArgs = call.function.arguments
      const params = isRecord(rawArgs)
        ? rawArgs
        : yield* parseArguments(module, method, provider, name, typeof rawArgs === "string" ? rawArgs : "")
      parts.push({
        type: "tool-call",
        id: typeof call.id === "string" && call.id !== "" ? call.id : yield* ids.generateId(),
        name,
        params
      })
    }
    parts.push({
      type: "finish",
      reason: toFinishReason(isRecord(choice) ? choice.finish_reason : undefined, toolCalls.length > 0),
      usage: toUsage(body.usage)
    })
    return parts
  })

export const errorText = (error: unknown): string => {
  if (typeof error === "string") return error
  if (isRecord(error) && typeof error.message === "string") return error.message
  return JSON.stringify(error)
}

// ---------------------------------------------------------------------------------------------
// Streaming: SSE chunks → stream parts

interface PendingTool {
  readonly index: number
  readonly id: string
  readonly name: string
  args: string
}

/** Assembles `chat.completion.chunk` events into stream parts. One instance per response. */
export class StreamAssembler {
  private started = false
  private textId: string | undefined
  private reasoningId: string | undefined
  private blocks = 0
  private readonly tools = new Map<number, PendingTool>()
  private finishReason: unknown = undefined
  private usage: ChatUsage | undefined
  done = false

  constructor(
    readonly provider: string,
    readonly ids: IdGenerator.Service
  ) {}

  /** Whether the server said the response is complete (`[DONE]` or a finish reason). */
  get complete(): boolean {
    return this.done || this.finishReason !== undefined
  }

  /**
   * The parts for a run of stream events, in one effect: a stream runs each effect it maps with its
   * context provided anew, so one per chunk of events (rather than one per event) keeps that per read.
   * An event that fails (an error the provider reports mid-stream, malformed JSON) does not take the
   * parts of the events before it in the same run with it: they come back with the error.
   */
  chunks(events: Chunk.Chunk<{ readonly data: string }>): Effect.Effect<{
    readonly parts: Chunk.Chunk<Response.StreamPartEncoded>
    readonly error?: AiError.AiError | undefined
  }> {
    const self = this
    return Effect.gen(function* () {
      const parts: Array<Response.StreamPartEncoded> = []
      for (const event of events) {
        const next = yield* Effect.either(self.chunk(event.data))
        if (next._tag === "Left") return { parts: Chunk.unsafeFromArray(parts), error: next.left }
        for (const part of next.right) parts.push(part)
      }
      return { parts: Chunk.unsafeFromArray(parts) }
    })
  }

  chunk(data: string): Effect.Effect<Array<Response.StreamPartEncoded>, AiError.AiError> {
    const self = this
    return Effect.gen(function* () {
      if (data.trim() === "[DONE]") {
        self.done = true
        return []
      }
      let body: unknown
      try {
        body = JSON.parse(data)
      } catch (cause) {
        return yield* new AiError.MalformedOutput({
          module: "OpenAiCompatible",
          method: "streamText",
          description: `${self.provider} sent an unreadable stream event: ${JSON.stringify(data.slice(0, 200))}`,
          cause
        })
      }
      if (!isRecord(body)) return []
      if (body.error !== undefined) {
        return yield* new AiError.UnknownError({
          module: "OpenAiCompatible",
          method: "streamText",
          description: `${self.provider} reported an error mid-stream: ${errorText(body.error)}`
        })
      }
      const parts: Array<Response.StreamPartEncoded> = []
      if (!self.started) {
        self.started = true
        parts.push(metadataPart(body))
      }
      if (isRecord(body.usage)) self.usage = body.usage
      const choice = Array.isArray(body.choices) ? body.choices[0] : undefined
      if (!isRecord(choice)) return parts
      const delta = isRecord(choice.delta) ? choice.delta : {}
      const reasoning = delta.reasoning_content ?? delta.reasoning
      if (typeof reasoning === "string" && reasoning !== "") {
        if (self.reasoningId === undefined) {
          self.reasoningId = `reasoning-${self.blocks++}`
          parts.push({ type: "reasoning-start", id: self.reasoningId })
        }
        parts.push({ type: "reasoning-delta", id: self.reasoningId, delta: reasoning })
      }
      if (typeof delta.content === "string" && delta.content !== "") {
        if (self.reasoningId !== undefined) {
          parts.push({ type: "reasoning-end", id: self.reasoningId })
          self.reasoningId = undefined
        }
        if (self.textId === undefined) {
          self.textId = `text-${self.blocks++}`
          parts.push({ type: "text-start", id: self.textId })
        }
        parts.push({ type: "text-delta", id: self.textId, delta: delta.content })
      }
      if (Array.isArray(delta.tool_calls)) {
        for (const call of delta.tool_calls) {
          if (!isRecord(call)) continue
          const fn = isRecord(call.function) ? call.function : {}
          const index =
            typeof call.index === "number"
              ? call.index
              : ([...self.tools.values()].find((t) => t.id === call.id)?.index ?? self.tools.size)
          let tool = self.tools.get(index)
          if (tool === undefined) {
            if (typeof fn.name !== "string" || fn.name === "") {
              return yield* new AiError.MalformedOutput({
                module: "OpenAiCompatible",
                method: "streamText",
                description: `${self.provider} streamed a tool call without a function name`
              })
            }
            const id = typeof call.id === "string" && call.id !== "" ? call.id : yield* self.ids.generateId()
            tool = { index, id, name: fn.name, args: "" }
            self.tools.set(index, tool)
            parts.push({ type: "tool-params-start", id, name: fn.name })
          }
          const args = isRecord(fn.arguments) ? JSON.stringify(fn.arguments) : fn.arguments
          if (typeof args === "string" && args !== "") {
            tool.args += args
            parts.push({ type: "tool-params-delta", id: tool.id, delta: args })
          }
        }
      }
      if (choice.finish_reason !== undefined && choice.finish_reason !== null) self.finishReason = choice.finish_reason
      return parts
    })
  }

  /** Closes open blocks, emits the assembled tool calls and the finish part. */
  finish(): Effect.Effect<Array<Response.StreamPartEncoded>, AiError.AiError> {
    const self = this
    return Effect.gen(function* () {
      const parts: Array<Response.StreamPartEncoded> = []
      if (self.reasoningId !== undefined) parts.push({ type: "reasoning-end", id: self.reasoningId })
      if (self.textId !== undefined) parts.push({ type: "text-end", id: self.textId })
      const tools = [...self.tools.values()].sort((a, b) => a.index - b.index)
      for (const tool of tools) {
        parts.push({ type: "tool-params-end", id: tool.id })
        const params = yield* parseArguments("OpenAiCompatible", "streamText", self.provider, tool.name, tool.args)
        parts.push({ type: "tool-call", id: tool.id, name: tool.name, params })
      }
      parts.push({
        type: "finish",
        reason: toFinishReason(self.finishReason, tools.length > 0),
        usage: toUsage(self.usage)
      })
      return parts
    })
  }
}
