/**
 * The Anthropic Messages API on the wire (`POST /v1/messages`): the request body, each history
 * message's JSON encoded once per session, and the response (whole, or streamed as server-sent
 * events) read into @effect/ai's parts without Schema. The body is byte for byte the one
 * `@effect/ai-anthropic` 0.27 (`AnthropicLanguageModel`) sends for the same prompt and config, so a
 * prompt cache (and recorded logs) carry over.
 *
 * @example
 * ```ts
 * const { pieces, beta } = requestBody(providerOptions, { max_tokens: 4096, model: "claude-sonnet-4-5" }, true)
 * const body = bytesOf(pieces) // (./joinJson.js)
 * const decoder = new StreamDecoder()
 * const { parts, error } = decoder.events(chunkOfSseEvents)
 * ```
 */
import { AiError, type LanguageModel, type Prompt, type Response, Tool } from "@effect/ai"
import { Chunk, Encoding } from "effect"

const module = "AnthropicLanguageModel"

const cacheControlOf = (x: { readonly options?: unknown }): unknown =>
  (x.options as { anthropic?: { cacheControl?: unknown } } | undefined)?.anthropic?.cacheControl

// ---------------------------------------------------------------------------------------------
// Prompt → request body

/** A message's content blocks as JSON text (comma-separated, no brackets), and the betas they need. */
interface Encoded {
  readonly json: string
  readonly pdf: boolean
}

const blocksJson = (blocks: ReadonlyArray<unknown>): string => blocks.map((b) => JSON.stringify(b)).join(",")

const base64 = (data: string | Uint8Array): string => (typeof data === "string" ? data : Encoding.encodeBase64(data))

const userBlocks = (message: Prompt.UserMessage): Encoded => {
  const blocks: Array<unknown> = []
  let pdf = false
  const n = message.content.length
  for (let j = 0; j < n; j++) {
    const part = message.content[j]!
    const cache_control = cacheControlOf(part) ?? (j === n - 1 ? cacheControlOf(message) : undefined)
    if (part.type === "text") {
      blocks.push({ type: "text", text: part.text, cache_control })
      continue
    }
    if (part.mediaType.startsWith("image/")) {
      const source =
        part.data instanceof URL
          ? { type: "url", url: part.data.toString() }
          : {
              type: "base64",
              media_type: part.mediaType === "image/*" ? "image/jpeg" : part.mediaType,
              data: base64(part.data)
            }
      blocks.push({ type: "image", source, cache_control })
    } else if (part.mediaType === "application/pdf" || part.mediaType === "text/plain") {
      if (part.mediaType === "application/pdf") pdf = true
      const options = (part.options as { anthropic?: any } | undefined)?.anthropic
      const citations: boolean = options?.citations?.enabled ?? false
      const source =
        part.data instanceof URL
          ? { type: "url", url: part.data.toString() }
          : part.mediaType === "application/pdf"
            ? { type: "base64", media_type: "application/pdf", data: base64(part.data) }
            : { type: "text", media_type: "text/plain", data: base64(part.data) }
      blocks.push({
        type: "document",
        source,
        title: (options !== undefined ? options.documentTitle : undefined) ?? part.fileName,
        ...(options?.documentContext ? { context: options.documentContext } : undefined),
        ...(citations ? { citations: { enabled: true } } : undefined),
        cache_control
      })
    } else {
      throw new AiError.MalformedInput({
        module,
        method: "prepareMessages",
        description: `Detected unsupported media type for file: '${part.mediaType}'`
      })
    }
  }
  return { json: blocksJson(blocks), pdf }
}

const toolBlocks = (message: Prompt.ToolMessage): Encoded => {
  const blocks: Array<unknown> = []
  const n = message.content.length
  for (let j = 0; j < n; j++) {
    const part = message.content[j]!
    blocks.push({
      type: "tool_result",
      tool_use_id: part.id,
      content: JSON.stringify(part.result),
      is_error: part.isFailure,
      cache_control: cacheControlOf(part) ?? (j === n - 1 ? cacheControlOf(message) : undefined)
    })
  }
  return { json: blocksJson(blocks), pdf: false }
}

/** `trimLast`: the message ends the prompt (Anthropic refuses trailing whitespace there). */
const assistantBlocks = (message: Prompt.AssistantMessage, trimLast: boolean): Encoded => {
  const blocks: Array<unknown> = []
  const n = message.content.length
  for (let k = 0; k < n; k++) {
    const part = message.content[k]!
    const cache_control = cacheControlOf(part) ?? (k === n - 1 ? cacheControlOf(message) : undefined)
    switch (part.type) {
      case "text": {
        blocks.push({ type: "text", text: trimLast && k === n - 1 ? part.text.trim() : part.text })
        break
      }
      case "reasoning": {
        const info = (part.options as { anthropic?: any } | undefined)?.anthropic
        if (info !== undefined) {
          if (info.type === "thinking")
            blocks.push({ type: "thinking", thinking: part.text, signature: info.signature })
          else blocks.push({ type: "redacted_thinking", data: info.redactedData })
        }
        break
      }
      case "tool-call": {
        if (part.providerExecuted) {
          const name =
            part.name === "AnthropicCodeExecution"
              ? "code_execution"
              : part.name === "AnthropicWebSearch"
                ? "web_search"
                : undefined
          if (name !== undefined)
            blocks.push({ type: "server_tool_use", id: part.id, name, input: part.params, cache_control })
        } else {
          blocks.push({ type: "tool_use", id: part.id, name: part.name, input: part.params, cache_control })
        }
        break
      }
      case "tool-result": {
        const type =
          part.name === "AnthropicCodeExecution"
            ? "code_execution_tool_result"
            : part.name === "AnthropicWebSearch"
              ? "web_search_tool_result"
              : undefined
        if (type === undefined) {
          throw new AiError.MalformedInput({
            module,
            method: "prepareMessages",
            description: `Provider executed tool result for tool ${part.name} is not supported in prompt`
          })
        }
        blocks.push({ type, tool_use_id: part.id, content: part.result, cache_control })
        break
      }
      default:
        break
    }
  }
  return { json: blocksJson(blocks), pdf: false }
}

/**
 * Each prompt message's blocks, encoded once: a session sends the same history again with every
 * request, and its messages are the same (immutable) objects each time.
 */
const wireJson = new WeakMap<Prompt.Message, Encoded>()

const encodeMessage = (message: Prompt.Message): Encoded => {
  let encoded = wireJson.get(message)
  if (encoded === undefined) {
    switch (message.role) {
      case "system":
        encoded = {
          json: JSON.stringify({ type: "text", text: message.content, cache_control: cacheControlOf(message) }),
          pdf: false
        }
        break
      case "user":
        encoded = userBlocks(message)
        break
      case "tool":
        encoded = toolBlocks(message)
        break
      case "assistant":
        encoded = assistantBlocks(message, false)
        break
    }
    wireJson.set(message, encoded)
  }
  return encoded
}

/**
 * The `system` (JSON text, or undefined) and `messages` of a prompt, and whether a PDF is in it.
 * `messages` is the array's JSON text (without its brackets) in pieces, separators included, to be
 * put together as they are (see `joinJson.ts`): each message block is a piece of its own.
 */
export const messagesJson = (
  prompt: Prompt.Prompt
): { readonly system: string | undefined; readonly messages: Array<string>; readonly pdf: boolean } => {
  const content = prompt.content
  const n = content.length
  let system: string | undefined
  let pdf = false
  const messages: Array<string> = []
  let i = 0
  while (i < n) {
    const kind = content[i]!.role === "tool" ? "user" : content[i]!.role
    let end = i + 1
    while (end < n && (content[end]!.role === "tool" ? "user" : content[end]!.role) === kind) end++
    const blocks: Array<string> = []
    for (let j = i; j < end; j++) {
      const message = content[j]!
      // the prompt's last text block is trimmed: not the message's JSON in every other request
      const encoded =
        message.role === "assistant" && end === n && j === end - 1
          ? assistantBlocks(message, true)
          : encodeMessage(message)
      if (encoded.pdf) pdf = true
      if (encoded.json !== "") blocks.push(encoded.json)
    }
    if (kind === "system") system = `[${blocks.join(",")}]`
    else {
      if (messages.length > 0) messages.push(",")
      messages.push(kind === "user" ? OPEN_USER : OPEN_ASSISTANT)
      for (let b = 0; b < blocks.length; b++) {
        if (b > 0) messages.push(",")
        messages.push(blocks[b]!)
      }
      messages.push("]}")
    }
    i = end
  }
  return { system, messages, pdf }
}

const OPEN_USER = '{"role":"user","content":['
const OPEN_ASSISTANT = '{"role":"assistant","content":['

interface WireTool {
  readonly name: string
  readonly json: string
}

/** Each user-defined tool's wire JSON, built once (its JSON schema takes a walk over the tool's schema). */
const toolWire = new WeakMap<object, WireTool>()

/** Anthropic's own tools: the beta they need, their name and type, whether their arguments go along. */
const providerTools: Record<string, { beta?: string; name: string; type: string; args?: true }> = {
  "anthropic.bash_20241022": { beta: "computer-use-2024-10-22", name: "bash", type: "bash_20241022" },
  "anthropic.bash_20250124": { beta: "computer-use-2025-01-24", name: "bash", type: "bash_20250124" },
  "anthropic.code_execution_20250522": {
    beta: "code-execution-2025-05-22",
    name: "code_execution",
    type: "code_execution_2025522",
    args: true
  },
  "anthropic.code_execution_20250825": {
    beta: "code-execution-2025-08-25",
    name: "code_execution",
    type: "code_execution_20250825",
    args: true
  },
  "anthropic.computer_use_20241022": {
    beta: "computer-use-2025-10-22",
    name: "computer",
    type: "computer_20241022",
    args: true
  },
  "anthropic.computer_use_20250124": {
    beta: "computer-use-2025-01-24",
    name: "computer",
    type: "computer_20250124",
    args: true
  },
  "anthropic.text_editor_20241022": {
    beta: "computer-use-2024-10-22",
    name: "str_replace_editor",
    type: "text_editor_20241022"
  },
  "anthropic.text_editor_20250124": {
    beta: "computer-use-2025-01-24",
    name: "str_replace_editor",
    type: "text_editor_20250124"
  },
  "anthropic.text_editor_20250429": {
    beta: "computer-use-2025-01-24",
    name: "str_replace_based_edit_tool",
    type: "text_editor_20250429"
  },
  "anthropic.text_editor_20250728": { name: "str_replace_based_edit_tool", type: "text_editor_20250728" },
  "anthropic.web_search_20250305": { name: "web_search", type: "web_search_20250305", args: true }
}

/** The `tools` (JSON text) and `tool_choice` of a request, and the betas its tools need. */
const toolFields = (
  options: LanguageModel.ProviderOptions,
  disableParallel: unknown,
  betas: Set<string>
): { tools: string | undefined; toolChoice: unknown } => {
  if (options.responseFormat.type === "json") {
    // (the tools are still looked at: their betas go along)
    if (options.tools.length > 0 && options.toolChoice !== "none") wireTools(options, betas)
    const ast = options.responseFormat.schema.ast
    return {
      tools: JSON.stringify([
        {
          name: options.responseFormat.objectName,
          description: Tool.getDescriptionFromSchemaAst(ast) ?? "Respond with a JSON object",
          input_schema: Tool.getJsonSchemaFromSchemaAst(ast)
        }
      ]),
      toolChoice: { type: "tool", name: options.responseFormat.objectName, disable_parallel_tool_use: true }
    }
  }
  if (options.tools.length === 0 || options.toolChoice === "none") return { tools: undefined, toolChoice: undefined }
  let tools = wireTools(options, betas)
  const choice = options.toolChoice
  let toolChoice: unknown
  if (choice === "auto") toolChoice = { type: "auto", disable_parallel_tool_use: disableParallel }
  else if (choice === "required") toolChoice = { type: "any", disable_parallel_tool_use: disableParallel }
  else if ("tool" in choice)
    toolChoice = { type: "tool", name: choice.tool, disable_parallel_tool_use: disableParallel }
  else {
    const allowed = new Set<string>(choice.oneOf)
    tools = tools.filter((tool) => allowed.has(tool.name))
    toolChoice = { type: choice.mode === "required" ? "any" : "auto", disable_parallel_tool_use: disableParallel }
  }
  return { tools: `[${tools.map((t) => t.json).join(",")}]`, toolChoice }
}

const wireTools = (options: LanguageModel.ProviderOptions, betas: Set<string>): Array<WireTool> => {
  const out: Array<WireTool> = []
  for (const tool of options.tools) {
    if (Tool.isUserDefined(tool)) {
      let wire = toolWire.get(tool)
      if (wire === undefined) {
        wire = {
          name: tool.name,
          json: JSON.stringify({
            name: tool.name,
            description: Tool.getDescription(tool as any),
            input_schema: Tool.getJsonSchema(tool as any)
          })
        }
        toolWire.set(tool, wire)
      }
      out.push(wire)
    }
    if (Tool.isProviderDefined(tool)) {
      const known = providerTools[tool.id]
      if (known === undefined) {
        throw new AiError.MalformedInput({
          module,
          method: "prepareTools",
          description: `Received request to call unknown provider-defined tool '${tool.name}'`
        })
      }
      if (known.beta !== undefined) betas.add(known.beta)
      const args = known.args ? (tool as { args?: object }).args : undefined
      out.push({ name: known.name, json: JSON.stringify({ ...args, name: known.name, type: known.type }) })
    }
  }
  return out
}

/** Request fields placed after the config's: a config that has one of them is left to `JSON.stringify`. */
const ownFields = ["system", "messages", "tools", "tool_choice", "stream"]

/**
 * The request's JSON text for `config` (`{ model, max_tokens?, …, ...override }`), in pieces (see
 * `joinJson.ts`), and the value of its `anthropic-beta` header. Fails (throws) with `MalformedInput` for a prompt the API cannot take.
 */
export const requestBody = (
  options: LanguageModel.ProviderOptions,
  config: Readonly<Record<string, unknown>>,
  stream: boolean
): { readonly pieces: ReadonlyArray<string>; readonly beta: string | undefined } => {
  const { messages, pdf, system } = messagesJson(options.prompt)
  const betas = new Set<string>()
  if (pdf) betas.add("pdfs-2024-09-25")
  const { toolChoice, tools } = toolFields(options, config.disableParallelToolCalls, betas)
  const head: Record<string, unknown> = { max_tokens: 4096, ...config }
  let pieces: Array<string>
  if (ownFields.some((k) => k in head)) {
    pieces = [
      JSON.stringify({
        ...head,
        system: system === undefined ? undefined : JSON.parse(system),
        messages: JSON.parse(`[${messages.join("")}]`),
        tools: tools === undefined ? undefined : JSON.parse(tools),
        tool_choice: toolChoice,
        ...(stream ? { stream: true } : {})
      })
    ]
  } else {
    const h = JSON.stringify(head)
    const choice = toolChoice === undefined ? undefined : JSON.stringify(toolChoice)
    pieces = [`${h.slice(0, -1)}${system !== undefined ? `,"system":${system}` : ""},"messages":[`]
    for (const m of messages) pieces.push(m)
    pieces.push(
      `]${tools !== undefined ? `,"tools":${tools}` : ""}${choice !== undefined ? `,"tool_choice":${choice}` : ""}${stream ? `,"stream":true}` : "}"}`
    )
  }
  return { pieces, beta: betas.size > 0 ? [...betas].join(",") : undefined }
}

// ---------------------------------------------------------------------------------------------
// Response → parts

const finishReasons: Record<string, Response.FinishReason> = {
  end_turn: "stop",
  max_tokens: "length",
  pause_turn: "pause",
  refusal: "content-filter",
  stop_sequence: "stop",
  tool_use: "tool-calls"
}

const finishReason = (reason: unknown, json = false): Response.FinishReason => {
  const r = typeof reason === "string" && Object.hasOwn(finishReasons, reason) ? finishReasons[reason] : undefined
  if (r === undefined) return "unknown"
  return json && r === "tool-calls" ? "stop" : r
}

/** Anthropic's own tools, by the name they are called with. */
const providerToolNames: Record<string, string> = {
  bash: "AnthropicBash",
  code_execution: "AnthropicCodeExecution",
  computer: "AnthropicComputerUse",
  str_replace_based_edit_tool: "AnthropicTextEditor",
  str_replace_editor: "AnthropicTextEditor",
  web_search: "AnthropicWebSearch"
}

const providerToolName = (name: string): string | undefined =>
  Object.hasOwn(providerToolNames, name) ? providerToolNames[name] : undefined

/** The results of Anthropic's own tools: the tool, and the content type that says it failed (none: not an array). */
const serverResults: Record<string, readonly [name: string, providerName: string, failure: string | undefined]> = {
  bash_code_execution_tool_result: [
    "AnthropicCodeExecution",
    "code_execution",
    "bash_code_execution_tool_result_error"
  ],
  code_execution_tool_result: ["AnthropicCodeExecution", "code_execution", "code_execution_tool_result_error"],
  text_editor_code_execution_tool_result: [
    "AnthropicCodeExecution",
    "code_execution",
    "text_editor_code_execution_tool_result_error"
  ],
  web_search_tool_result: ["AnthropicWebSearch", "web_search", undefined]
}

const serverResult = (block: any): Response.ToolResultPartEncoded | undefined => {
  const known = Object.hasOwn(serverResults, block.type) ? serverResults[block.type] : undefined
  if (known === undefined) return undefined
  const [name, providerName, failure] = known
  const content = block.content
  return {
    type: "tool-result",
    id: block.tool_use_id,
    name,
    isFailure: failure === undefined ? !Array.isArray(content) : content?.type === failure,
    result: content,
    providerName,
    providerExecuted: true
  } as Response.ToolResultPartEncoded
}

const isRecord = (u: unknown): u is Record<string, any> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A document of the prompt that the model may cite (a PDF or text file part with citations enabled). */
interface CitableDocument {
  readonly title: string
  readonly fileName: string | undefined
  readonly mediaType: string
}

/** The prompt's citable documents, in order: a citation names one by its index. */
export const citableDocuments = (prompt: Prompt.Prompt): Array<CitableDocument> => {
  const out: Array<CitableDocument> = []
  for (const message of prompt.content) {
    if (message.role !== "user") continue
    for (const part of message.content) {
      if (
        part.type === "file" &&
        (part.mediaType === "application/pdf" || part.mediaType === "text/plain") &&
        ((part.options as { anthropic?: any } | undefined)?.anthropic?.citations?.enabled ?? false)
      )
        out.push({ title: part.fileName ?? "Untitled Document", fileName: part.fileName, mediaType: part.mediaType })
    }
  }
  return out
}

/** A citation as a source part (undefined for the kinds that are not passed on). */
const citationSource = (
  citation: any,
  documents: ReadonlyArray<CitableDocument>,
  nextId: () => string
): Response.StreamPartEncoded | undefined => {
  if (citation?.type === "page_location" || citation?.type === "char_location") {
    const document = documents[citation.document_index]
    if (document === undefined) return undefined
    const metadata =
      citation.type === "char_location"
        ? {
            source: "document",
            type: citation.type,
            citedText: citation.cited_text,
            startCharIndex: citation.start_char_index,
            endCharIndex: citation.end_char_index
          }
        : {
            source: "document",
            type: citation.type,
            citedText: citation.cited_text,
            startPageNumber: citation.start_page_number,
            endPageNumber: citation.end_page_number
          }
    return {
      type: "source",
      sourceType: "document",
      id: nextId(),
      mediaType: document.mediaType,
      title: citation.document_title ?? document.title,
      fileName: document.fileName,
      metadata: { anthropic: metadata }
    } as Response.StreamPartEncoded
  }
  if (citation?.type === "web_search_result_location") {
    return {
      type: "source",
      sourceType: "url",
      id: nextId(),
      url: citation.url,
      title: citation.title ?? "Untitled",
      metadata: {
        anthropic: { source: "url", citedText: citation.cited_text, encryptedIndex: citation.encrypted_index }
      }
    } as Response.StreamPartEncoded
  }
  return undefined
}

/** A whole (non-streamed) `message` as response parts. */
export const fromMessage = (
  body: unknown,
  options: LanguageModel.ProviderOptions,
  nextId: () => string
): Array<Response.PartEncoded> | AiError.AiError => {
  if (!isRecord(body) || !Array.isArray(body.content) || !isRecord(body.usage)) {
    return new AiError.MalformedOutput({
      module,
      method: "generateText",
      description: `anthropic sent a response that is not a message: ${JSON.stringify(body).slice(0, 200)}`
    })
  }
  const json = options.responseFormat.type === "json"
  const documents = citableDocuments(options.prompt)
  const parts: Array<Response.PartEncoded> = [
    { type: "response-metadata", id: body.id, modelId: body.model, timestamp: new Date().toISOString() }
  ]
  for (const block of body.content as Array<any>) {
    if (typeof block !== "object" || block === null) continue
    switch (block.type) {
      case "text":
        if (!json) {
          parts.push({ type: "text", text: block.text })
          if (Array.isArray(block.citations))
            for (const citation of block.citations) {
              const source = citationSource(citation, documents, nextId)
              if (source !== undefined) parts.push(source as Response.PartEncoded)
            }
        }
        break
      case "thinking":
        parts.push({
          type: "reasoning",
          text: block.thinking,
          metadata: { anthropic: { type: "thinking", signature: block.signature } }
        })
        break
      case "redacted_thinking":
        parts.push({
          type: "reasoning",
          text: "",
          metadata: { anthropic: { type: "redacted_thinking", redactedData: block.data } }
        })
        break
      case "tool_use": {
        if (json) parts.push({ type: "text", text: JSON.stringify(block.input) })
        else {
          const providerTool = providerToolName(block.name)
          parts.push({
            type: "tool-call",
            id: block.id,
            name: providerTool ?? block.name,
            params: block.input,
            providerName: providerTool !== undefined ? block.name : undefined,
            providerExecuted: false
          })
        }
        break
      }
      case "server_tool_use": {
        const providerTool = providerToolName(block.name)
        if (providerTool !== undefined)
          parts.push({
            type: "tool-call",
            id: block.id,
            name: providerTool,
            params: block.input,
            providerName: block.name,
            providerExecuted: true
          })
        break
      }
      default: {
        const result = serverResult(block)
        if (result !== undefined) parts.push(result)
      }
    }
  }
  const usage = body.usage
  parts.push({
    type: "finish",
    reason: finishReason(body.stop_reason, json),
    usage: {
      inputTokens: usage.input_tokens,
      outputTokens: usage.output_tokens,
      totalTokens: usage.input_tokens + usage.output_tokens,
      cachedInputTokens: usage.cache_read_input_tokens ?? undefined
    },
    metadata: { anthropic: { usage, stopSequence: body.stop_sequence ?? undefined } }
  } as Response.PartEncoded)
  return parts
}

type Block =
  | { readonly type: "text" }
  | { readonly type: "reasoning" }
  | {
      readonly type: "tool-call"
      readonly id: string
      readonly name: string
      params: string
      readonly providerName: string | undefined
      readonly providerExecuted: boolean
    }

/** Reads a streamed response's events into stream parts. One instance per response. */
export class StreamDecoder {
  private reason: Response.FinishReason = "unknown"
  private readonly blocks = new Map<number, Block>()
  private blockType: string | undefined
  private readonly usage: {
    inputTokens?: unknown
    outputTokens?: unknown
    totalTokens?: unknown
    cachedInputTokens?: unknown
  } = {
    inputTokens: undefined,
    outputTokens: undefined,
    totalTokens: undefined
  }
  private metaUsage: unknown
  private stopSequence: string | undefined
  /** Whether `message_stop` came (the events after it are not read). */
  done = false

  /** The prompt's citable documents, looked for when the first citation comes. */
  private documents: ReadonlyArray<CitableDocument> | undefined

  /** `prompt`: the request's (its documents are what citations name); `nextId`: ids for their source parts. */
  constructor(
    readonly prompt: Prompt.Prompt | undefined = undefined,
    readonly nextId: () => string = () => ""
  ) {}

  /**
   * The parts for a run of events. An event that fails (unreadable) does not take the parts of the
   * events before it in the same run with it: they come back with the error.
   */
  events(events: Chunk.Chunk<{ readonly data: string }>): {
    readonly parts: Chunk.Chunk<Response.StreamPartEncoded>
    readonly error?: AiError.AiError | undefined
  } {
    const parts: Array<Response.StreamPartEncoded> = []
    for (const event of events) {
      if (this.done) break
      try {
        this.event(event.data, parts)
      } catch (error) {
        if (!AiError.isAiError(error)) throw error
        return { parts: Chunk.unsafeFromArray(parts), error }
      }
    }
    return { parts: Chunk.unsafeFromArray(parts) }
  }

  /** Appends the parts of one event's data to `parts`; throws an `AiError` for an unreadable one. */
  event(data: string, parts: Array<Response.StreamPartEncoded>): void {
    let event: any
    try {
      event = JSON.parse(data)
    } catch (cause) {
      throw new AiError.MalformedOutput({
        module,
        method: "streamText",
        description: `anthropic sent an unreadable stream event: ${JSON.stringify(data.slice(0, 200))}`,
        cause
      })
    }
    if (!isRecord(event)) return
    switch (event.type) {
      case "message_start": {
        const message = isRecord(event.message) ? event.message : {}
        const usage = isRecord(message.usage) ? message.usage : {}
        this.usage.inputTokens = usage.input_tokens
        this.usage.cachedInputTokens = usage.cache_read_input_tokens ?? undefined
        this.metaUsage = usage
        parts.push({
          type: "response-metadata",
          id: message.id,
          modelId: message.model,
          timestamp: new Date().toISOString()
        })
        break
      }
      case "message_delta": {
        const usage = isRecord(event.usage) ? event.usage : {}
        const delta = isRecord(event.delta) ? event.delta : {}
        if (usage.output_tokens !== undefined && usage.output_tokens !== null)
          this.usage.outputTokens = usage.output_tokens
        this.usage.totalTokens = ((this.usage.inputTokens as number) ?? 0) + (usage.output_tokens ?? 0)
        if (typeof delta.stop_sequence === "string") this.stopSequence = delta.stop_sequence
        if (delta.stop_reason !== undefined && delta.stop_reason !== null) this.reason = finishReason(delta.stop_reason)
        break
      }
      case "message_stop": {
        this.done = true
        parts.push({
          type: "finish",
          reason: this.reason,
          usage: this.usage,
          metadata: { anthropic: { usage: this.metaUsage, stopSequence: this.stopSequence } }
        } as Response.StreamPartEncoded)
        break
      }
      case "content_block_start":
        this.blockStart(event.index, isRecord(event.content_block) ? event.content_block : {}, parts)
        break
      case "content_block_delta":
        this.blockDelta(event.index, isRecord(event.delta) ? event.delta : {}, parts)
        break
      case "content_block_stop":
        this.blockStop(event.index, parts)
        break
      case "error":
        parts.push({ type: "error", error: event.error })
        break
      default:
        break
    }
  }

  private blockStart(index: number, block: Record<string, any>, parts: Array<Response.StreamPartEncoded>): void {
    this.blockType = block.type
    const id = String(index)
    switch (block.type) {
      case "text":
        this.blocks.set(index, { type: "text" })
        parts.push({ type: "text-start", id })
        break
      case "thinking":
        this.blocks.set(index, { type: "reasoning" })
        parts.push({ type: "reasoning-start", id })
        break
      case "redacted_thinking":
        this.blocks.set(index, { type: "reasoning" })
        parts.push({
          type: "reasoning-start",
          id,
          metadata: { anthropic: { type: "redacted_thinking", redactedData: block.data } }
        })
        break
      case "tool_use": {
        const providerTool = providerToolName(block.name)
        const providerName = providerTool !== undefined ? block.name : undefined
        this.blocks.set(index, {
          type: "tool-call",
          id: block.id,
          name: providerTool ?? block.name,
          params: "",
          providerName,
          providerExecuted: false
        })
        parts.push({ type: "tool-params-start", id: block.id, name: block.name, providerName, providerExecuted: false })
        break
      }
      case "server_tool_use": {
        const providerTool = providerToolName(block.name)
        if (providerTool !== undefined) {
          this.blocks.set(index, {
            type: "tool-call",
            id: block.id,
            name: providerTool,
            params: "",
            providerName: block.name,
            providerExecuted: true
          })
          parts.push({
            type: "tool-params-start",
            id: block.id,
            name: providerTool,
            providerName: block.name,
            providerExecuted: true
          })
        }
        break
      }
      default: {
        const result = serverResult(block)
        if (result !== undefined) parts.push(result)
      }
    }
  }

  private blockDelta(index: number, delta: Record<string, any>, parts: Array<Response.StreamPartEncoded>): void {
    const id = String(index)
    switch (delta.type) {
      case "text_delta":
        parts.push({ type: "text-delta", id, delta: delta.text })
        break
      case "thinking_delta":
        parts.push({ type: "reasoning-delta", id, delta: delta.thinking })
        break
      case "signature_delta":
        if (this.blockType === "thinking")
          parts.push({
            type: "reasoning-delta",
            id,
            delta: "",
            metadata: { anthropic: { type: "thinking", signature: delta.signature } }
          })
        break
      case "input_json_delta": {
        const block = this.blocks.get(index)
        if (block?.type === "tool-call") {
          parts.push({ type: "tool-params-delta", id: block.id, delta: delta.partial_json })
          block.params += delta.partial_json
        }
        break
      }
      case "citations_delta": {
        this.documents ??= this.prompt === undefined ? [] : citableDocuments(this.prompt)
        const source = citationSource(delta.citation, this.documents, this.nextId)
        if (source !== undefined) parts.push(source)
        break
      }
      default:
        break
    }
  }

  private blockStop(index: number, parts: Array<Response.StreamPartEncoded>): void {
    const block = this.blocks.get(index)
    if (block !== undefined) {
      switch (block.type) {
        case "text":
          parts.push({ type: "text-end", id: String(index) })
          break
        case "reasoning":
          parts.push({ type: "reasoning-end", id: String(index) })
          break
        case "tool-call": {
          parts.push({ type: "tool-params-end", id: block.id })
          // a tool call without parameters streams none
          const params = block.params.length === 0 ? "{}" : block.params
          let parsed: unknown
          try {
            parsed = Tool.unsafeSecureJsonParse(params)
          } catch (cause) {
            throw new AiError.MalformedOutput({
              module,
              method: "makeStreamResponse",
              description: `Failed to securely parse tool call parameters for tool '${block.name}':\nParameters: ${params}`,
              cause
            })
          }
          parts.push({
            type: "tool-call",
            id: block.id,
            name: block.name,
            params: parsed,
            providerName: block.providerName,
            providerExecuted: block.providerExecuted
          })
          break
        }
      }
      this.blocks.delete(index)
    }
    this.blockType = undefined
  }
}
