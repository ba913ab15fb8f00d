import { AiError, IdGenerator, type LanguageModel, type Prompt, type Response, Tool } from "@effect/ai"
import { Chunk, Effect, Encoding } from "effect"
import { piecesBetween } from "./joinJson.js"
import { strictCompatible } from "./openaiStrict.js"

// OpenAI's Responses API (`POST /responses`) spoken directly: the request body is the JSON text the
// `@effect/ai-openai` 0.41 client sends for the same call, byte for byte (prompt caches and recorded
// logs depend on it), each history message encoded once per session; the stream's events are read
// as plain JSON, without schemas.

const module = "OpenAiLanguageModel"

const isRecord = (u: unknown): u is Record<string, any> => typeof u === "object" && u !== null && !Array.isArray(u)

/** `null` as absent, as the client's schemas (`optionalWith(…, { nullable: true })`) read it. */
const opt = <A>(u: A | null | undefined): A | undefined => (u === null ? undefined : u)

// ---------------------------------------------------------------------------------------------
// Prompt → input items

/** The role a system message is sent with: `developer` for the reasoning models. */
export const systemRole = (model: string): "system" | "developer" =>
  model.startsWith("o") || model.startsWith("gpt-5") || model.startsWith("codex-") || model.startsWith("computer-use")
    ? "developer"
    : "system"

interface InputEncoding {
  readonly role: "system" | "developer"
  readonly fileIdPrefixes: ReadonlyArray<string> | undefined
}

const isFileId = (data: string, enc: InputEncoding): boolean =>
  enc.fileIdPrefixes?.some((prefix) => data.startsWith(prefix)) === true

const openaiOptions = (part: { readonly options: unknown }): Record<string, any> | undefined => {
  const o = (part.options as { openai?: unknown } | undefined)?.openai
  return isRecord(o) ? o : undefined
}

/** A prompt the Responses API cannot take (a file of a media type it does not read). */
class Unsupported {
  constructor(readonly description: string) {}
}

/** Appends the input items of one prompt message to `items` (throws `Unsupported`). */
const pushItems = (items: Array<unknown>, message: Prompt.Message, enc: InputEncoding): void => {
  switch (message.role) {
    case "system": {
      items.push({ role: enc.role, content: message.content })
      break
    }
    case "user": {
      const content: Array<unknown> = []
      for (let index = 0; index < message.content.length; index++) {
        const part = message.content[index]!
        if (part.type === "text") {
          content.push({ type: "input_text", text: part.text })
          continue
        }
        if (part.mediaType.startsWith("image/")) {
          const detail = openaiOptions(part)?.imageDetail ?? "auto"
          const mediaType = part.mediaType === "image/*" ? "image/jpeg" : part.mediaType
          if (typeof part.data === "string" && isFileId(part.data, enc))
            content.push({ type: "input_image", file_id: part.data, detail })
          if (part.data instanceof URL) content.push({ type: "input_image", image_url: part.data.toString(), detail })
          if (part.data instanceof Uint8Array) {
            const imageUrl = `data:${mediaType};base64,${Encoding.encodeBase64(part.data)}`
            content.push({ type: "input_image", image_url: imageUrl, detail })
          }
        } else if (part.mediaType === "application/pdf") {
          if (typeof part.data === "string" && isFileId(part.data, enc))
            content.push({ type: "input_file", file_id: part.data })
          if (part.data instanceof URL) content.push({ type: "input_file", file_url: part.data.toString() })
          if (part.data instanceof Uint8Array) {
            const fileName = part.fileName ?? `part-${index}.pdf`
            const fileData = `data:application/pdf;base64,${Encoding.encodeBase64(part.data)}`
            content.push({ type: "input_file", filename: fileName, file_data: fileData })
          }
        } else {
          throw new Unsupported(`Detected unsupported media type for file: '${part.mediaType}'`)
        }
      }
      items.push({ role: "user", content })
      break
    }
    case "assistant": {
      // a reasoning item's summary parts come as several prompt parts with the same item id
      const reasoning: Record<string, { summary: Array<unknown> }> = Object.create(null)
      for (const part of message.content) {
        switch (part.type) {
          case "text": {
            items.push({
              role: "assistant",
              content: [{ type: "output_text", text: part.text }],
              id: openaiOptions(part)?.itemId
            })
            break
          }
          case "reasoning": {
            const o = openaiOptions(part)
            if (o?.itemId === undefined) break
            const summary: Array<unknown> = part.text.length > 0 ? [{ type: "summary_text", text: part.text }] : []
            const known = reasoning[o.itemId]
            if (known === undefined) {
              const item = { id: o.itemId, type: "reasoning", summary, encrypted_content: o.encryptedContent }
              reasoning[o.itemId] = item
              items.push(item)
            } else known.summary.push(...summary)
            break
          }
          case "tool-call": {
            if (!part.providerExecuted)
              items.push({
                id: openaiOptions(part)?.itemId,
                type: "function_call",
                call_id: part.id,
                name: part.name,
                arguments: JSON.stringify(part.params)
              })
            break
          }
        }
      }
      break
    }
    case "tool": {
      for (const part of message.content)
        items.push({ type: "function_call_output", call_id: part.id, output: JSON.stringify(part.result) })
      break
    }
  }
}

/**
 * Each prompt message's items as JSON text, encoded once per way of encoding (the system role, the
 * file id prefixes): a session sends the same history again with every request, and its messages
 * are the same (immutable) objects each time.
 */
const cache = new Map<string, WeakMap<Prompt.Message, string>>()

const cacheFor = (enc: InputEncoding): WeakMap<Prompt.Message, string> => {
  const key = enc.fileIdPrefixes === undefined ? enc.role : `${enc.role} ${JSON.stringify(enc.fileIdPrefixes)}`
  let found = cache.get(key)
  if (found === undefined) {
    found = new WeakMap()
    cache.set(key, found)
  }
  return found
}

/**
 * The items of a request's `input`, each message's as JSON text (without the array's brackets);
 * fails on a file the API cannot take.
 */
const inputParts = (
  prompt: Prompt.Prompt,
  enc: InputEncoding
): Effect.Effect<Array<string>, AiError.MalformedInput> => {
  const wire = cacheFor(enc)
  const parts: Array<string> = []
  try {
    for (const message of prompt.content) {
      let json = wire.get(message)
      if (json === undefined) {
        const items: Array<unknown> = []
        pushItems(items, message, enc)
        json = items.map((item) => JSON.stringify(item)).join(",")
        wire.set(message, json)
      }
      if (json !== "") parts.push(json)
    }
  } catch (e) {
    if (e instanceof Unsupported)
      return Effect.fail(new AiError.MalformedInput({ module, method: "prepareMessages", description: e.description }))
    throw e
  }
  return Effect.succeed(parts)
}

// ---------------------------------------------------------------------------------------------
// Tools, response format, include

const providerTools: Record<string, string> = {
  "openai.code_interpreter": "code_interpreter",
  "openai.file_search": "file_search",
  "openai.web_search": "web_search",
  "openai.web_search_preview": "web_search_preview"
}

/** The toolkit names of OpenAI's own tools, by their type (`OpenAiTool`). */
const providerToolNames: Record<string, string> = {
  code_interpreter: "OpenAiCodeInterpreter",
  file_search: "OpenAiFileSearch",
  web_search: "OpenAiWebSearch",
  web_search_preview: "OpenAiWebSearchPreview"
}

/** Each function tool's wire form, built once per `strict` setting (its JSON schema takes a walk). */
const toolWire = new WeakMap<object, { readonly strict: unknown; readonly fix: boolean; readonly wire: object }>()

const functionTool = (tool: Tool.Any, strict: unknown, fix: boolean): object => {
  const known = toolWire.get(tool)
  if (known !== undefined && known.strict === strict && known.fix === fix) return known.wire
  let wire: Record<string, unknown> = {
    type: "function",
    name: tool.name,
    description: Tool.getDescription(tool as any),
    parameters: Tool.getJsonSchema(tool as any),
    strict
  }
  // (what `strictWhereSafe` does to the request, per tool)
  if (fix && strict === true && !strictCompatible(wire.parameters)) wire = { ...wire, strict: false }
  toolWire.set(tool, { strict, fix, wire })
  return wire
}

const prepareTools = (
  options: LanguageModel.ProviderOptions,
  strict: unknown,
  fix: boolean
): Effect.Effect<{ tools: Array<unknown> | undefined; toolChoice: unknown }, AiError.MalformedInput> => {
  if (options.tools.length === 0) return Effect.succeed({ tools: undefined, toolChoice: undefined })
  const tools: Array<unknown> = []
  let toolChoice: unknown
  let allowed = options.tools
  if (typeof options.toolChoice === "object" && "oneOf" in options.toolChoice) {
    const names = new Set<string>(options.toolChoice.oneOf)
    allowed = options.tools.filter((tool) => names.has(tool.name))
    toolChoice = options.toolChoice.mode === "required" ? "required" : "auto"
  }
  for (const tool of allowed) {
    if (Tool.isUserDefined(tool)) tools.push(functionTool(tool, strict, fix))
    if (Tool.isProviderDefined(tool)) {
      const type = providerTools[tool.id]
      if (type === undefined)
        return Effect.fail(
          new AiError.MalformedInput({
            module: "AnthropicLanguageModel",
            method: "prepareTools",
            description: `Received request to call unknown provider-defined tool '${tool.name}'`
          })
        )
      tools.push({ ...tool.args, type })
    }
  }
  if (options.toolChoice === "auto" || options.toolChoice === "none" || options.toolChoice === "required")
    toolChoice = options.toolChoice
  if (typeof options.toolChoice === "object" && "tool" in options.toolChoice) {
    const name = options.toolChoice.tool
    toolChoice = providerToolNames[name] === undefined ? { type: "function", name } : { type: name }
  }
  return Effect.succeed({ tools, toolChoice })
}

const webSearchTool = (options: LanguageModel.ProviderOptions): Tool.AnyProviderDefined | undefined =>
  options.tools.find(
    (tool) =>
      Tool.isProviderDefined(tool) && (tool.id === "openai.web_search" || tool.id === "openai.web_search_preview")
  ) as Tool.AnyProviderDefined | undefined

const prepareInclude = (options: LanguageModel.ProviderOptions, config: Record<string, any>): Array<unknown> => {
  const include = new Set<unknown>(config.include ?? [])
  if (options.tools.some((tool) => Tool.isProviderDefined(tool) && tool.id === "openai.code_interpreter"))
    include.add("code_interpreter_call.outputs")
  if (webSearchTool(options) !== undefined) include.add("web_search_call.action.sources")
  return Array.from(include)
}

const responseFormat = (options: LanguageModel.ProviderOptions, strict: unknown, fix: boolean): unknown => {
  if (options.responseFormat.type !== "json") return { type: "text" }
  const schema = options.responseFormat.schema
  const format = {
    type: "json_schema",
    name: options.responseFormat.objectName,
    description: Tool.getDescriptionFromSchemaAst(schema.ast) ?? "Response with a JSON object",
    schema: Tool.getJsonSchemaFromSchemaAst(schema.ast),
    strict
  }
  return fix && strict === true && !strictCompatible(format.schema) ? { ...format, strict: false } : format
}

// ---------------------------------------------------------------------------------------------
// The request

/** Stands for the input in the request object until its JSON text takes its place. */
const inputMark = "\u0000musekit:responses-input\u0000"
const inputMarkJson = `"input":${JSON.stringify(inputMark)}`

/**
 * The request's JSON text: `{ model, ...config, input, include, text, tools, tool_choice }`, `strict`
 * left out (it decides the tools' `strict`), `stream: true` last when streaming. With `fixStrict`,
 * a tool or response format whose schema OpenAI's strict mode rejects goes with `strict: false`.
 * In pieces (see `joinJson.ts`): each of the history's items is a piece of its own.
 */
export const requestPieces = (
  config: Record<string, any>,
  options: LanguageModel.ProviderOptions,
  fixStrict: boolean,
  stream: boolean
): Effect.Effect<Array<string>, AiError.MalformedInput> =>
  Effect.flatMap(
    inputParts(options.prompt, { role: systemRole(config.model), fileIdPrefixes: config.fileIdPrefixes }),
    (input) =>
      Effect.map(prepareTools(options, config.strict ?? true, fixStrict), ({ tools, toolChoice }) => {
        const { strict, ...requestConfig } = config
        const request: Record<string, unknown> = {
          ...requestConfig,
          input: inputMark,
          include: prepareInclude(options, config),
          text: { format: responseFormat(options, strict ?? true, fixStrict), verbosity: config.text?.verbosity },
          tools,
          tool_choice: toolChoice
        }
        if (stream) request.stream = true
        const json = JSON.stringify(request)
        const at = json.indexOf(inputMarkJson)
        if (at < 0) return [JSON.stringify({ ...request, input: JSON.parse(`[${input.join(",")}]`) })]
        return piecesBetween(`${json.slice(0, at)}"input":[`, input, `]${json.slice(at + inputMarkJson.length)}`)
      })
  )

// ---------------------------------------------------------------------------------------------
// Response → parts

const finishReasons: Record<string, Response.FinishReason> = {
  content_filter: "content-filter",
  function_call: "tool-calls",
  length: "length",
  max_output_tokens: "length",
  stop: "stop",
  tool_calls: "tool-calls"
}

const finishReason = (reason: unknown, hasToolCalls: boolean): Response.FinishReason => {
  if (reason === null || reason === undefined) return hasToolCalls ? "tool-calls" : "stop"
  return (
    (typeof reason === "string" && Object.hasOwn(finishReasons, reason) ? finishReasons[reason] : undefined) ??
    (hasToolCalls ? "tool-calls" : "unknown")
  )
}

const finishPart = (response: Record<string, any>, hasToolCalls: boolean): Response.FinishPartEncoded => {
  const usage = isRecord(response.usage) ? response.usage : undefined
  return {
    type: "finish",
    reason: finishReason(opt(opt(response.incomplete_details)?.reason), hasToolCalls),
    usage: {
      inputTokens: usage?.input_tokens,
      outputTokens: usage?.output_tokens,
      totalTokens: (usage?.input_tokens ?? 0) + (usage?.output_tokens ?? 0),
      reasoningTokens: usage?.output_tokens_details?.reasoning_tokens,
      cachedInputTokens: usage?.input_tokens_details?.cached_tokens
    },
    metadata: { openai: { serviceTier: opt(response.service_tier) } }
  } as Response.FinishPartEncoded
}

const metadataPart = (response: Record<string, any>): Response.ResponseMetadataPartEncoded => ({
  type: "response-metadata",
  id: response.id,
  modelId: response.model,
  // a server that leaves out `created_at` (or sends it as text) gets the time the part was read
  timestamp: (typeof response.created_at === "number" && Number.isFinite(response.created_at)
    ? new Date(response.created_at * 1000)
    : new Date()
  ).toISOString()
})

const parseParams = (
  method: string,
  toolName: string,
  args: unknown
): Effect.Effect<unknown, AiError.MalformedOutput> =>
  Effect.try({
    try: () => Tool.unsafeSecureJsonParse(args as string),
    catch: (cause) =>
      new AiError.MalformedOutput({
        module,
        method,
        description: `Failed to securely parse tool call parameters for tool '${toolName}':\nParameters: ${args}`,
        cause
      })
  })

/** Turns a non-streamed `response` object into response parts. */
export const fromResponse = (
  body: unknown,
  options: LanguageModel.ProviderOptions
): Effect.Effect<Array<Response.PartEncoded>, AiError.AiError, IdGenerator.IdGenerator> =>
  Effect.gen(function* () {
    const method = "makeResponse"
    if (!isRecord(body) || !Array.isArray(body.output) || typeof body.id !== "string") {
      return yield* new AiError.MalformedOutput({
        module: "OpenAiClient",
        method: "createResponse",
        description: `openai sent a response without 'output': ${JSON.stringify(body).slice(0, 200)}`
      })
    }
    const ids = yield* IdGenerator.IdGenerator
    const webSearch = webSearchTool(options)
    let hasToolCalls = false
    const parts: Array<Response.PartEncoded> = [metadataPart(body)]
    const seen = new Set<string>()
    for (const item of body.output as Array<Record<string, any>>) {
      if (!isRecord(item)) continue
      if (item.id) {
        if (seen.has(item.id)) continue
        seen.add(item.id)
      }
      switch (item.type) {
        case "message": {
          for (const c of Array.isArray(item.content) ? item.content : []) {
            if (c?.type === "output_text") {
              parts.push({ type: "text", text: c.text, metadata: { openai: { itemId: item.id } } } as any)
              for (const a of Array.isArray(c.annotations) ? c.annotations : []) {
                if (a?.type === "file_citation")
                  parts.push({
                    type: "source",
                    sourceType: "document",
                    id: yield* ids.generateId(),
                    mediaType: "text/plain",
                    title: opt(a.filename) ?? "Untitled Document",
                    metadata: { openai: { type: a.type, index: a.index } }
                  } as any)
                if (a?.type === "url_citation")
                  parts.push({
                    type: "source",
                    sourceType: "url",
                    id: yield* ids.generateId(),
                    url: a.url,
                    title: a.title,
                    metadata: { openai: { type: a.type, startIndex: a.start_index, endIndex: a.end_index } }
                  } as any)
              }
            } else if (c?.type === "refusal") {
              parts.push({ type: "text", text: "", metadata: { openai: { refusal: c.refusal } } } as any)
            }
          }
          break
        }
        case "function_call": {
          hasToolCalls = true
          const params = yield* parseParams(method, item.name, item.arguments)
          parts.push({
            type: "tool-call",
            id: item.call_id,
            name: item.name,
            params,
            metadata: { openai: { itemId: opt(item.id) } }
          } as any)
          break
        }
        case "code_interpreter_call": {
          const common = { id: item.id, name: "OpenAiCodeInterpreter", providerName: "code_interpreter" }
          parts.push({
            type: "tool-call",
            ...common,
            params: { code: opt(item.code), container_id: item.container_id },
            providerExecuted: true
          } as any)
          parts.push({
            type: "tool-result",
            ...common,
            isFailure: false,
            result: opt(item.outputs),
            providerExecuted: true
          } as any)
          break
        }
        case "file_search_call": {
          const common = { id: item.id, name: "OpenAiFileSearch", providerName: "file_search" }
          parts.push({ type: "tool-call", ...common, params: {}, providerExecuted: true } as any)
          parts.push({
            type: "tool-result",
            ...common,
            isFailure: false,
            result: { status: item.status, queries: item.queries, ...(opt(item.results) && { results: item.results }) },
            providerExecuted: true
          } as any)
          break
        }
        case "web_search_call": {
          const common = {
            id: item.id,
            name: webSearch?.name ?? "OpenAiWebSearch",
            providerName: webSearch?.providerName ?? "web_search"
          }
          parts.push({ type: "tool-call", ...common, params: { action: item.action }, providerExecuted: true } as any)
          parts.push({
            type: "tool-result",
            ...common,
            isFailure: false,
            result: { status: item.status },
            providerExecuted: true
          } as any)
          break
        }
        case "reasoning": {
          const summary: Array<Record<string, any>> = Array.isArray(item.summary) ? item.summary : []
          if (summary.length === 0)
            parts.push({ type: "reasoning", text: "", metadata: { openai: { itemId: item.id } } })
          else
            for (const s of summary)
              parts.push({
                type: "reasoning",
                text: s.text,
                metadata: { openai: { itemId: item.id, encryptedContent: opt(item.encrypted_content) } }
              } as any)
          break
        }
      }
    }
    parts.push(finishPart(body, hasToolCalls))
    return parts
  })

// ---------------------------------------------------------------------------------------------
// Streaming: events → stream parts

/** The JSON of one stream event; undefined for what is not an event object (skipped, as the client did). */
export const parseEvent = (data: string): Record<string, any> | undefined => {
  try {
    const event = JSON.parse(data)
    return isRecord(event) && typeof event.type === "string" ? event : undefined
  } catch {
    return undefined
  }
}

/** Whether an event is the last of a response. */
export const isLast = (event: Record<string, any>): boolean =>
  event.type === "response.completed" || event.type === "response.incomplete"

/** Turns a response's stream events into stream parts. One instance per response. */
export class StreamAssembler {
  private hasToolCalls = false
  private readonly reasoning: Record<
    string,
    { readonly summaryParts: Array<number>; readonly encryptedContent: unknown }
  > = Object.create(null) // keyed by the server's item ids ("__proto__" too)
  private readonly toolCalls: Record<number, { readonly id: string; readonly name: string }> = {}
  private readonly webSearch: Tool.AnyProviderDefined | undefined

  constructor(
    readonly ids: IdGenerator.Service,
    options: LanguageModel.ProviderOptions
  ) {
    this.webSearch = webSearchTool(options)
  }

  /**
   * The parts for a run of events, in one effect (one per network read). An event that fails (tool
   * arguments that are not JSON) does not take the parts of the events before it with it.
   */
  chunks(events: Chunk.Chunk<Record<string, any>>): Effect.Effect<{
    readonly parts: Chunk.Chunk<Response.StreamPartEncoded>
    readonly error?: AiError.AiError | undefined
  }> {
    const self = this
    return Effect.gen(function* () {
      const parts: Array<Response.StreamPartEncoded> = []
      for (const event of events) {
        const next = yield* Effect.either(self.event(event, parts))
        if (next._tag === "Left") return { parts: Chunk.unsafeFromArray(parts), error: next.left }
      }
      return { parts: Chunk.unsafeFromArray(parts) }
    })
  }

  /** Appends the parts of one event to `parts`. */
  event(event: Record<string, any>, parts: Array<Response.StreamPartEncoded>): Effect.Effect<void, AiError.AiError> {
    const push = (part: unknown) => parts.push(part as Response.StreamPartEncoded)
    switch (event.type) {
      case "response.created": {
        if (isRecord(event.response)) push(metadataPart(event.response))
        return Effect.void
      }
      case "error": {
        push({ type: "error", error: event })
        return Effect.void
      }
      case "response.completed":
      case "response.incomplete":
      case "response.failed": {
        push(finishPart(isRecord(event.response) ? event.response : {}, this.hasToolCalls))
        return Effect.void
      }
      case "response.output_item.added": {
        const item = isRecord(event.item) ? event.item : {}
        switch (item.type) {
          case "file_search_call": {
            this.toolCalls[event.output_index] = { id: item.id, name: "OpenAiFileSearch" }
            push({
              type: "tool-params-start",
              id: item.id,
              name: "OpenAiFileSearch",
              providerName: "file_search",
              providerExecuted: true
            })
            break
          }
          case "function_call": {
            this.toolCalls[event.output_index] = { id: item.call_id, name: item.name }
            push({ type: "tool-params-start", id: item.call_id, name: item.name })
            break
          }
          case "message": {
            push({ type: "text-start", id: item.id, metadata: { openai: { itemId: item.id } } })
            break
          }
          case "reasoning": {
            const encryptedContent = opt(item.encrypted_content)
            this.reasoning[item.id] = { summaryParts: [0], encryptedContent }
            push({
              type: "reasoning-start",
              id: `${item.id}:0`,
              metadata: { openai: { itemId: item.id, encryptedContent } }
            })
            break
          }
          case "web_search_call": {
            const name = this.webSearch?.name ?? "OpenAiWebSearch"
            this.toolCalls[event.output_index] = { id: item.id, name }
            push({
              type: "tool-params-start",
              id: item.id,
              name,
              providerName: this.webSearch?.providerName ?? "web_search",
              providerExecuted: true
            })
            break
          }
        }
        return Effect.void
      }
      case "response.output_item.done": {
        const item = isRecord(event.item) ? event.item : {}
        switch (item.type) {
          case "code_interpreter_call": {
            const common = { id: item.id, name: "OpenAiCodeInterpreter", providerName: "code_interpreter" }
            push({
              type: "tool-call",
              ...common,
              params: { code: opt(item.code), container_id: item.container_id },
              providerExecuted: true
            })
            push({
              type: "tool-result",
              ...common,
              isFailure: false,
              result: { outputs: opt(item.outputs) },
              providerExecuted: true
            })
            break
          }
          case "file_search_call": {
            delete this.toolCalls[event.output_index]
            const common = { id: item.id, name: "OpenAiFileSearch", providerName: "file_search" }
            push({ type: "tool-params-end", id: item.id })
            push({ type: "tool-call", ...common, params: {}, providerExecuted: true })
            push({
              type: "tool-result",
              ...common,
              isFailure: false,
              result: {
                status: item.status,
                queries: item.queries,
                ...(opt(item.results) && { results: item.results })
              },
              providerExecuted: true
            })
            break
          }
          case "function_call": {
            this.hasToolCalls = true
            return Effect.map(parseParams("makeStreamResponse", item.name, item.arguments), (params) => {
              push({ type: "tool-params-end", id: item.call_id })
              push({
                type: "tool-call",
                id: item.call_id,
                name: item.name,
                params,
                metadata: { openai: { itemId: opt(item.id) } }
              })
              delete this.toolCalls[event.output_index]
            })
          }
          case "message": {
            push({ type: "text-end", id: item.id })
            break
          }
          case "reasoning": {
            const active = this.reasoning[item.id]
            const encryptedContent = opt(item.encrypted_content)
            for (const summaryIndex of active?.summaryParts ?? [])
              push({
                type: "reasoning-end",
                id: `${item.id}:${summaryIndex}`,
                metadata: { openai: { itemId: item.id, encryptedContent } }
              })
            delete this.reasoning[item.id]
            break
          }
          case "web_search_call": {
            delete this.toolCalls[event.output_index]
            const common = {
              id: item.id,
              name: "OpenAiWebSearch",
              providerName: "web_search"
            }
            push({ type: "tool-params-end", id: item.id })
            push({ type: "tool-call", ...common, params: { action: item.action }, providerExecuted: true })
            push({
              type: "tool-result",
              ...common,
              isFailure: false,
              result: { status: item.status },
              providerExecuted: true
            })
            break
          }
        }
        return Effect.void
      }
      case "response.output_text.delta": {
        push({ type: "text-delta", id: event.item_id, delta: event.delta })
        return Effect.void
      }
      case "response.output_text.annotation.added": {
        const a = isRecord(event.annotation) ? event.annotation : {}
        if (a.type !== "file_citation" && a.type !== "url_citation") return Effect.void
        return Effect.map(this.ids.generateId(), (id) => {
          if (a.type === "file_citation")
            push({
              type: "source",
              sourceType: "document",
              id,
              mediaType: "text/plain",
              title: opt(a.filename) ?? "Untitled Document",
              fileName: opt(a.filename) ?? a.file_id
            })
          else push({ type: "source", sourceType: "url", id, url: a.url, title: a.title })
        })
      }
      case "response.function_call_arguments.delta": {
        const call = this.toolCalls[event.output_index]
        if (call !== undefined) push({ type: "tool-params-delta", id: call.id, delta: event.delta })
        return Effect.void
      }
      case "response.reasoning_summary_part.added": {
        // the first one's start comes with `response.output_item.added`
        if (event.summary_index > 0) {
          const active = this.reasoning[event.item_id]
          if (active !== undefined) active.summaryParts.push(event.summary_index)
          push({
            type: "reasoning-start",
            id: `${event.item_id}:${event.summary_index}`,
            metadata: { openai: { itemId: event.item_id, encryptedContent: active?.encryptedContent } }
          })
        }
        return Effect.void
      }
      case "response.reasoning_summary_text.delta": {
        push({
          type: "reasoning-delta",
          id: `${event.item_id}:${event.summary_index}`,
          delta: event.delta,
          metadata: { openai: { itemId: event.item_id } }
        })
        return Effect.void
      }
      default:
        return Effect.void
    }
  }
}
