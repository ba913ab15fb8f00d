import { AiError, IdGenerator, type LanguageModel, type Prompt, type Response, Tool } from "@effect/ai"
import { Effect, Encoding } from "effect"

// The Gemini API's generateContent wire format (https://ai.google.dev/api/generate-content): the
// subset this adapter writes (contents, systemInstruction, tools, toolConfig, generationConfig)
// and reads (candidates, usageMetadata, promptFeedback).

const module = "Google"

// ---------------------------------------------------------------------------------------------
// Wire types

/** A part of a `Content`; exactly one of the data fields is set. */
export interface GeminiPart {
  readonly text?: string
  readonly thought?: boolean
  readonly thoughtSignature?: string
  readonly inlineData?: { readonly mimeType: string; readonly data: string }
  readonly fileData?: { readonly mimeType: string; readonly fileUri: string }
  readonly functionCall?: { readonly id?: string; readonly name: string; readonly args?: unknown }
  readonly functionResponse?: { readonly id?: string; readonly name: string; readonly response: unknown }
}

export interface GeminiContent {
  readonly role: "user" | "model"
  readonly parts: ReadonlyArray<GeminiPart>
}

/** Gemini's OpenAPI-3.0 subset for function parameters and response schemas. */
export interface GeminiSchema {
  type?: "STRING" | "NUMBER" | "INTEGER" | "BOOLEAN" | "ARRAY" | "OBJECT" | "NULL"
  title?: string
  description?: string
  enum?: Array<string>
  format?: string
  pattern?: string
  minLength?: string
  maxLength?: string
  minimum?: number
  maximum?: number
  minItems?: string
  maxItems?: string
  items?: GeminiSchema
  properties?: Record<string, GeminiSchema>
  required?: ReadonlyArray<string>
  anyOf?: Array<GeminiSchema>
}

export interface GeminiUsage {
  readonly promptTokenCount?: number
  readonly candidatesTokenCount?: number
  readonly totalTokenCount?: number
  readonly cachedContentTokenCount?: number
  readonly thoughtsTokenCount?: number
}

// ---------------------------------------------------------------------------------------------
// JSON Schema → Gemini schema

const isRecord = (u: unknown): u is Record<string, any> => typeof u === "object" && u !== null && !Array.isArray(u)

const annotations = (schema: Record<string, any>): GeminiSchema => {
  const out: GeminiSchema = {}
  if (typeof schema.title === "string" && schema.title !== "") out.title = schema.title
  if (typeof schema.description === "string" && schema.description !== "") out.description = schema.description
  return out
}

const enumType = (values: ReadonlyArray<unknown>): NonNullable<GeminiSchema["type"]> =>
  values.every((v) => typeof v === "number")
    ? "NUMBER"
    : values.every((v) => typeof v === "boolean")
      ? "BOOLEAN"
      : "STRING"

/**
 * Converts the JSON Schema @effect/ai makes for a tool's parameters (or a response format) into
 * Gemini's schema: upper-case types, integer bounds as strings, no `additionalProperties`.
 * References into `$defs` are inlined; a reference back into itself (a recursive schema) becomes
 * a plain `OBJECT`, as Gemini's schema has no references.
 */
export const toGeminiSchema = (root: unknown): GeminiSchema => {
  const defs: Record<string, unknown> = isRecord(root) && isRecord(root.$defs) ? root.$defs : {}
  const convert = (schema: unknown, seen: ReadonlySet<string>): GeminiSchema => {
    if (!isRecord(schema)) return { type: "OBJECT" }
    switch (schema.$id) {
      case "/schemas/never":
        return { type: "OBJECT", properties: {}, required: ["impossible_required_field"] }
      case "/schemas/any":
      case "/schemas/unknown":
        return { type: "OBJECT", description: schema.description || "Any value" }
      case "/schemas/void":
        return { type: "NULL", description: schema.description || "Void" }
      case "/schemas/object":
        return { type: "OBJECT", ...annotations(schema) }
    }
    if (typeof schema.$ref === "string") {
      const ref = schema.$ref
      const name = decodeURIComponent(ref.replace(/^#\/(\$defs|definitions)\//, ""))
        .replace(/~1/g, "/")
        .replace(/~0/g, "~")
      if (!(name in defs) || seen.has(name)) return { type: "OBJECT", ...annotations(schema) }
      return { ...convert(defs[name], new Set([...seen, name])), ...annotations(schema) }
    }
    if (Array.isArray(schema.enum)) {
      return { type: enumType(schema.enum), enum: schema.enum.map(String), ...annotations(schema) }
    }
    if (Array.isArray(schema.anyOf)) {
      return { anyOf: schema.anyOf.map((s: unknown) => convert(s, seen)), ...annotations(schema) }
    }
    switch (schema.type) {
      case "null":
        return { type: "NULL", ...annotations(schema) }
      case "string": {
        const out: GeminiSchema = { type: "STRING", ...annotations(schema) }
        if (typeof schema.minLength === "number") out.minLength = String(schema.minLength)
        if (typeof schema.maxLength === "number") out.maxLength = String(schema.maxLength)
        if (typeof schema.pattern === "string") out.pattern = schema.pattern
        if (typeof schema.format === "string") out.format = schema.format
        return out
      }
      case "number":
      case "integer": {
        const out: GeminiSchema = { type: schema.type === "number" ? "NUMBER" : "INTEGER", ...annotations(schema) }
        if (typeof schema.minimum === "number") out.minimum = schema.minimum
        if (typeof schema.maximum === "number") out.maximum = schema.maximum
        return out
      }
      case "boolean":
        return { type: "BOOLEAN", ...annotations(schema) }
      case "array": {
        const out: GeminiSchema = { type: "ARRAY", ...annotations(schema) }
        if (typeof schema.minItems === "number") out.minItems = String(schema.minItems)
        if (typeof schema.maxItems === "number") out.maxItems = String(schema.maxItems)
        // Gemini has no tuples: a tuple's items are given by its first element's type
        const items = Array.isArray(schema.items) ? schema.items[0] : schema.items
        if (items !== undefined) out.items = convert(items, seen)
        return out
      }
      default: {
        const out: GeminiSchema = { type: "OBJECT", ...annotations(schema) }
        if (isRecord(schema.properties)) {
          out.properties = {}
          for (const [key, value] of Object.entries(schema.properties)) out.properties[key] = convert(value, seen)
        }
        if (Array.isArray(schema.required) && schema.required.length > 0) out.required = schema.required
        return out
      }
    }
  }
  return convert(root, new Set())
}

// ---------------------------------------------------------------------------------------------
// Prompt → request

const signatureOf = (options: unknown): { thoughtSignature?: string } => {
  const s = (options as { google?: { thoughtSignature?: unknown } } | undefined)?.google?.thoughtSignature
  return typeof s === "string" && s !== "" ? { thoughtSignature: s } : {}
}

const base64 = (data: string | Uint8Array): string => (typeof data === "string" ? data : Encoding.encodeBase64(data))

/** A user's file: a URL stays a reference (`fileData`), anything else goes inline (`inlineData`). */
const filePart = (part: Prompt.FilePart): GeminiPart => {
  const mimeType = part.mediaType === "image/*" ? "image/jpeg" : part.mediaType
  const d = part.data
  if (d instanceof URL) return { fileData: { mimeType, fileUri: d.toString() } }
  if (typeof d === "string") {
    const dataUrl = /^data:([^;,]*)(;[^,]*)?,(.*)$/s.exec(d)
    if (dataUrl && /;base64/.test(dataUrl[2] ?? ""))
      return { inlineData: { mimeType: dataUrl[1] || mimeType, data: dataUrl[3]! } }
    if (/^(https?|gs):\/\//.test(d)) return { fileData: { mimeType, fileUri: d } }
  }
  return { inlineData: { mimeType, data: base64(d as string | Uint8Array) } }
}

/** Gemini wants a function's response as an object: anything else is wrapped (`output`, or `error` for a failure). */
const responseOf = (part: Prompt.ToolResultPart): unknown =>
  isRecord(part.result)
    ? part.result
    : part.isFailure
      ? { error: part.result ?? null }
      : { output: part.result ?? null }

/**
 * Converts a Prompt into `contents` and `systemInstruction`. Every system message goes into the
 * system instruction (Gemini has one); Gemma models take none, so it opens the first user turn.
 * A turn without parts (an empty reply) is left out, as Gemini refuses empty turns.
 */
export const toContents = (
  prompt: Prompt.Prompt,
  model: string
): Effect.Effect<
  {
    readonly contents: Array<GeminiContent>
    readonly systemInstruction: { readonly parts: ReadonlyArray<GeminiPart> } | undefined
  },
  AiError.AiError
> =>
  Effect.gen(function* () {
    const system: Array<string> = []
    const contents: Array<GeminiContent> = []
    for (const message of prompt.content) {
      switch (message.role) {
        case "system": {
          system.push(message.content)
          break
        }
        case "user": {
          const parts: Array<GeminiPart> = []
          for (const part of message.content) {
            if (part.type === "text") parts.push({ text: part.text })
            else parts.push(filePart(part))
          }
          if (parts.length > 0) contents.push({ role: "user", parts })
          break
        }
        case "assistant": {
          const parts: Array<GeminiPart> = []
          for (const part of message.content) {
            switch (part.type) {
              case "text":
                if (part.text.length > 0) parts.push({ text: part.text, ...signatureOf(part.options) })
                break
              case "reasoning":
                if (part.text.length > 0) parts.push({ text: part.text, thought: true, ...signatureOf(part.options) })
                break
              case "file": {
                if (part.data instanceof URL) {
                  return yield* new AiError.MalformedInput({
                    module,
                    method: "prepareMessages",
                    description: `Gemini takes no file URLs in the model's own turns (${part.data.toString()}); send the file's bytes instead.`
                  })
                }
                parts.push({ inlineData: { mimeType: part.mediaType, data: base64(part.data) } })
                break
              }
              case "tool-call":
                if (!part.providerExecuted)
                  parts.push({
                    functionCall: { name: part.name, args: part.params ?? {} },
                    ...signatureOf(part.options)
                  })
                break
            }
          }
          if (parts.length > 0) contents.push({ role: "model", parts })
          break
        }
        case "tool": {
          const parts: Array<GeminiPart> = message.content.map((part) => ({
            functionResponse: { id: part.id, name: part.name, response: responseOf(part) }
          }))
          if (parts.length > 0) contents.push({ role: "user", parts })
          break
        }
      }
    }
    if (system.length === 0) return { contents, systemInstruction: undefined }
    if (model.toLowerCase().startsWith("gemma-")) {
      const text = `${system.join("\n\n")}\n\n`
      const first = contents[0]
      if (first?.role === "user") contents[0] = { role: "user", parts: [{ text }, ...first.parts] }
      else contents.unshift({ role: "user", parts: [{ text }] })
      return { contents, systemInstruction: undefined }
    }
    return { contents, systemInstruction: { parts: system.map((text) => ({ text })) } }
  })

/** Whether a converted schema is an object with nothing in it (Gemini refuses those as parameters). */
const isEmptyObject = (s: GeminiSchema) =>
  s.type === "OBJECT" && (s.properties === undefined || Object.keys(s.properties).length === 0) && s.anyOf === undefined

/**
 * The `tools` and `toolConfig` fields: the prompt's own tools as `functionDeclarations`, the tool
 * choice as `functionCallingConfig` (`AUTO`, `ANY`, `NONE`, allowed names). Tools a provider runs
 * itself are not offered. `functionCallingConfig` fields in the config are kept.
 */
export const toolFields = (options: LanguageModel.ProviderOptions, config: Record<string, unknown>) => {
  let tools = options.tools.filter((tool) => Tool.isUserDefined(tool))
  let functionCallingConfig: Record<string, unknown>
  const choice = options.toolChoice
  if (choice === "none") functionCallingConfig = { mode: "NONE" }
  else if (choice === "auto") functionCallingConfig = { mode: "AUTO" }
  else if (choice === "required") functionCallingConfig = { mode: "ANY" }
  else if ("tool" in choice) functionCallingConfig = { mode: "ANY", allowedFunctionNames: [choice.tool] }
  else {
    const allowed = new Set<string>(choice.oneOf)
    tools = tools.filter((tool) => allowed.has(tool.name))
    functionCallingConfig =
      choice.mode === "auto" ? { mode: "AUTO" } : { mode: "ANY", allowedFunctionNames: [...allowed] }
  }
  if (tools.length === 0) return {}
  const configured = (config.toolConfig as { functionCallingConfig?: Record<string, unknown> } | undefined)
    ?.functionCallingConfig
  return {
    tools: {
      functionDeclarations: tools.map((tool) => {
        const parameters = toGeminiSchema(Tool.getJsonSchema(tool as any))
        return {
          name: tool.name,
          description: Tool.getDescription(tool as any) ?? "",
          ...(isEmptyObject(parameters) ? {} : { parameters })
        }
      })
    },
    toolConfig: {
      ...(config.toolConfig as object | undefined),
      functionCallingConfig: { ...configured, ...functionCallingConfig }
    }
  }
}

/** The request body: the config's fields, then the prompt, the tools and the response format. */
export const toRequest = (
  options: LanguageModel.ProviderOptions,
  model: string,
  config: Record<string, unknown>
): Effect.Effect<Record<string, unknown>, AiError.AiError> =>
  Effect.gen(function* () {
    const { contents, systemInstruction } = yield* toContents(options.prompt, model)
    const { toolConfig: _, ...rest } = config
    const generationConfig: Record<string, unknown> = { ...(config.generationConfig as object | undefined) }
    if (options.responseFormat.type === "json") {
      generationConfig.responseMimeType = "application/json"
      generationConfig.responseSchema = toGeminiSchema(
        Tool.getJsonSchemaFromSchemaAst(options.responseFormat.schema.ast)
      )
    }
    return {
      ...rest,
      ...(systemInstruction !== undefined ? { systemInstruction } : {}),
      contents,
      ...toolFields(options, config),
      ...(Object.keys(generationConfig).length > 0 ? { generationConfig } : {})
    }
  })

// ---------------------------------------------------------------------------------------------
// Response → parts

const finishReasons: Record<string, Response.FinishReason> = {
  STOP: "stop",
  MAX_TOKENS: "length",
  SAFETY: "content-filter",
  RECITATION: "content-filter",
  LANGUAGE: "content-filter",
  BLOCKLIST: "content-filter",
  PROHIBITED_CONTENT: "content-filter",
  SPII: "content-filter",
  IMAGE_SAFETY: "content-filter",
  IMAGE_PROHIBITED_CONTENT: "content-filter",
  IMAGE_RECITATION: "content-filter",
  MALFORMED_FUNCTION_CALL: "error",
  UNEXPECTED_TOOL_CALL: "error",
  TOO_MANY_TOOL_CALLS: "error",
  MISSING_THOUGHT_SIGNATURE: "error",
  FINISH_REASON_UNSPECIFIED: "other",
  IMAGE_OTHER: "other",
  NO_IMAGE: "other",
  OTHER: "other"
}

/** Gemini's `finishReason` as @effect/ai's; `STOP` after a function call is `tool-calls`. */
export const toFinishReason = (reason: unknown, hasToolCalls: boolean): Response.FinishReason => {
  if (typeof reason !== "string") return hasToolCalls ? "tool-calls" : "unknown"
  if (reason === "STOP" && hasToolCalls) return "tool-calls"
  return (Object.hasOwn(finishReasons, reason) ? finishReasons[reason] : undefined) ?? "unknown"
}

const count = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) ? u : undefined)

/**
 * `usageMetadata` as @effect/ai's usage, counted as Gemini counts (`candidatesTokenCount` leaves
 * the thinking tokens out; the wrapper adds them to the output).
 */
export const toUsage = (usage: GeminiUsage | undefined): typeof Response.Usage.Encoded => ({
  inputTokens: count(usage?.promptTokenCount),
  outputTokens: count(usage?.candidatesTokenCount),
  totalTokens: count(usage?.totalTokenCount),
  ...(count(usage?.thoughtsTokenCount) !== undefined ? { reasoningTokens: count(usage?.thoughtsTokenCount) } : {}),
  ...(count(usage?.cachedContentTokenCount) !== undefined
    ? { cachedInputTokens: count(usage?.cachedContentTokenCount) }
    : {})
})

const finishMetadata = (candidate: Record<string, any>, usage: unknown) => {
  const google: Record<string, unknown> = {}
  if (candidate.groundingMetadata !== undefined) google.groundingMetadata = candidate.groundingMetadata
  if (candidate.safetyRatings !== undefined) google.safetyRatings = candidate.safetyRatings
  if (candidate.urlContextMetadata !== undefined) google.urlContextMetadata = candidate.urlContextMetadata
  if (usage !== undefined) google.usageMetadata = usage
  return { google }
}

const metadataPart = (body: Record<string, any>): Response.ResponseMetadataPartEncoded => {
  const part: { type: "response-metadata"; id?: string; modelId?: string } = { type: "response-metadata" }
  if (typeof body.responseId === "string") part.id = body.responseId
  if (typeof body.modelVersion === "string") part.modelId = body.modelVersion
  return part
}

const errorText = (error: unknown): string => {
  if (typeof error === "string") return error
  if (isRecord(error) && typeof error.message === "string") {
    return typeof error.status === "string" ? `${error.message} (${error.status})` : error.message
  }
  return JSON.stringify(error)
}

/** A reported error or a blocked prompt in a 200 response, as an error. */
const refusal = (provider: string, method: string, body: Record<string, any>): AiError.AiError | undefined => {
  if (body.error !== undefined)
    return new AiError.UnknownError({
      module,
      method,
      description: `${provider} reported an error${method === "streamText" ? " mid-stream" : ""}: ${errorText(body.error)}`
    })
  const blocked = isRecord(body.promptFeedback) ? body.promptFeedback.blockReason : undefined
  if (typeof blocked === "string" && !(Array.isArray(body.candidates) && body.candidates.length > 0)) {
    const why =
      typeof body.promptFeedback.blockReasonMessage === "string" ? `: ${body.promptFeedback.blockReasonMessage}` : ""
    return new AiError.UnknownError({
      module,
      method,
      description: `${provider} blocked the prompt (${blocked})${why}. Next step: rephrase the request or remove the content it objects to.`
    })
  }
  return undefined
}

const callOf = (
  provider: string,
  method: string,
  part: GeminiPart
): Effect.Effect<
  { readonly id: string | undefined; readonly name: string; readonly params: unknown },
  AiError.AiError
> => {
  const call = part.functionCall as Record<string, any>
  if (typeof call.name !== "string" || call.name === "") {
    return Effect.fail(
      new AiError.MalformedOutput({
        module,
        method,
        description: `${provider} sent a function call without a name: ${JSON.stringify(call).slice(0, 200)}`
      })
    )
  }
  return Effect.succeed({
    id: typeof call.id === "string" && call.id !== "" ? call.id : undefined,
    name: call.name,
    params: call.args ?? {}
  })
}

const signatureMetadata = (part: GeminiPart) =>
  typeof part.thoughtSignature === "string" ? { metadata: { google: { thoughtSignature: part.thoughtSignature } } } : {}

const unreadable = (provider: string, method: string, data: string, cause?: unknown) =>
  new AiError.MalformedOutput({
    module,
    method,
    description: `${provider} sent a response that could not be read: ${JSON.stringify(data.length > 200 ? data.slice(0, 200) + "…" : data)}`,
    ...(cause !== undefined ? { cause } : {})
  })

/** Turns a `generateContent` response body into response parts. */
export const fromResponse = (
  provider: string,
  body: unknown
): Effect.Effect<Array<Response.PartEncoded>, AiError.AiError, IdGenerator.IdGenerator> =>
  Effect.gen(function* () {
    const method = "generateText"
    if (!isRecord(body)) return yield* unreadable(provider, method, JSON.stringify(body) ?? String(body))
    const refused = refusal(provider, method, body)
    if (refused !== undefined) return yield* refused
    const candidate = Array.isArray(body.candidates) ? body.candidates[0] : undefined
    if (!isRecord(candidate)) {
      return yield* new AiError.MalformedOutput({
        module,
        method,
        description: `${provider} sent a response without candidates: ${JSON.stringify(body).slice(0, 200)}`
      })
    }
    const ids = yield* IdGenerator.IdGenerator
    const parts: Array<Response.PartEncoded> = [metadataPart(body)]
    let hasToolCalls = false
    const content: Array<GeminiPart> = Array.isArray(candidate.content?.parts) ? candidate.content.parts : []
    for (const part of content) {
      if (!isRecord(part)) continue
      if (typeof part.text === "string" && part.text.length > 0) {
        parts.push(
          part.thought === true
            ? { type: "reasoning", text: part.text, ...signatureMetadata(part) }
            : { type: "text", text: part.text }
        )
      }
      if (isRecord(part.functionCall)) {
        const call = yield* callOf(provider, method, part)
        hasToolCalls = true
        parts.push({
          type: "tool-call",
          id: call.id ?? (yield* ids.generateId()),
          name: call.name,
          params: call.params,
          ...signatureMetadata(part)
        })
      }
      if (isRecord(part.inlineData) && typeof part.inlineData.data === "string") {
        if (typeof part.inlineData.mimeType !== "string") {
          return yield* new AiError.MalformedOutput({
            module,
            method,
            description: `${provider} sent inline data without a MIME type`
          })
        }
        parts.push({ type: "file", data: part.inlineData.data, mediaType: part.inlineData.mimeType })
      }
    }
    parts.push({
      type: "finish",
      reason: toFinishReason(candidate.finishReason, hasToolCalls),
      usage: toUsage(body.usageMetadata),
      metadata: finishMetadata(candidate, body.usageMetadata)
    })
    return parts
  })

// ---------------------------------------------------------------------------------------------
// Streaming: SSE events → stream parts

/**
 * Assembles `streamGenerateContent?alt=sse` events into stream parts. One instance per response.
 * Each event is a whole `GenerateContentResponse` carrying the next piece of the candidate; the one
 * with a `finishReason` is the last. Function calls arrive whole.
 */
export class StreamAssembler {
  private started = false
  private blocks = 0
  private textId: string | undefined
  private reasoningId: string | undefined
  private hasToolCalls = false
  private finishReason: string | undefined
  private usage: GeminiUsage | undefined
  private candidate: Record<string, any> = {}

  constructor(
    readonly provider: string,
    readonly ids: IdGenerator.Service
  ) {}

  /** Whether Gemini said the response is complete (a `finishReason`). */
  get complete(): boolean {
    return this.finishReason !== undefined
  }

  chunk(data: string): Effect.Effect<Array<Response.StreamPartEncoded>, AiError.AiError> {
    const self = this
    const method = "streamText"
    return Effect.gen(function* () {
      let body: unknown
      try {
        body = JSON.parse(data)
      } catch (cause) {
        return yield* unreadable(self.provider, method, data, cause)
      }
      if (!isRecord(body)) return yield* unreadable(self.provider, method, data)
      const refused = refusal(self.provider, method, body)
      if (refused !== undefined) return yield* refused
      const parts: Array<Response.StreamPartEncoded> = []
      if (!self.started) {
        self.started = true
        parts.push(metadataPart(body))
      }
      if (isRecord(body.usageMetadata)) self.usage = body.usageMetadata
      const candidate = Array.isArray(body.candidates) ? body.candidates[0] : undefined
      if (!isRecord(candidate)) return parts
      const content: Array<GeminiPart> = Array.isArray(candidate.content?.parts) ? candidate.content.parts : []
      for (const part of content) {
        if (!isRecord(part)) continue
        if (typeof part.text === "string" && part.text.length > 0) {
          if (part.thought === true) {
            if (self.textId !== undefined) {
              parts.push({ type: "text-end", id: self.textId })
              self.textId = undefined
            }
            if (self.reasoningId === undefined) {
              self.reasoningId = String(self.blocks++)
              parts.push({ type: "reasoning-start", id: self.reasoningId, ...signatureMetadata(part) })
            }
            parts.push({ type: "reasoning-delta", id: self.reasoningId, delta: part.text, ...signatureMetadata(part) })
          } else {
            if (self.reasoningId !== undefined) {
              parts.push({ type: "reasoning-end", id: self.reasoningId })
              self.reasoningId = undefined
            }
            if (self.textId === undefined) {
              self.textId = String(self.blocks++)
              parts.push({ type: "text-start", id: self.textId, ...signatureMetadata(part) })
            }
            parts.push({ type: "text-delta", id: self.textId, delta: part.text, ...signatureMetadata(part) })
          }
        }
        if (isRecord(part.functionCall)) {
          const call = yield* callOf(self.provider, method, part)
          const id = call.id ?? (yield* self.ids.generateId())
          self.hasToolCalls = true
          const meta = signatureMetadata(part)
          parts.push({ type: "tool-params-start", id, name: call.name, ...meta })
          parts.push({ type: "tool-params-delta", id, delta: JSON.stringify(call.params), ...meta })
          parts.push({ type: "tool-params-end", id, ...meta })
          parts.push({ type: "tool-call", id, name: call.name, params: call.params, ...meta })
        }
      }
      if (typeof candidate.finishReason === "string") {
        self.finishReason = candidate.finishReason
        self.candidate = candidate
      }
      return parts
    })
  }

  /**
   * Closes open blocks and emits the finish part, once Gemini said the response is complete; a
   * stream cut before that ends without one (the caller decides whether to ask again).
   */
  finish(): Array<Response.StreamPartEncoded> {
    if (!this.complete) return []
    const parts: Array<Response.StreamPartEncoded> = []
    if (this.textId !== undefined) parts.push({ type: "text-end", id: this.textId })
    if (this.reasoningId !== undefined) parts.push({ type: "reasoning-end", id: this.reasoningId })
    parts.push({
      type: "finish",
      reason: toFinishReason(this.finishReason, this.hasToolCalls),
      usage: toUsage(this.usage),
      metadata: finishMetadata(this.candidate, this.usage)
    })
    return parts
  }
}
