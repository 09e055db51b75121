-- Wireshark / tshark dissector for dimmnet frames: Ethernet II frames with
-- EtherType 0x88B5 carrying the 64-byte little-endian dimmnet header and
-- PayloadLen bytes of payload. docs/wire.md describes the format.
--
-- The tables between the GENERATED markers are rendered from package
-- vdev/wire (go generate ./vdev/wire): add or change a packet type, flag,
-- NACK code or header field there, never here. The code below them
-- refers to types, flags, codes and fields only through those tables.
--
-- Use:   tshark -X lua_script:/path/to/dimmnet.lua -r capture.pcap -V
--        wireshark -X lua_script:/path/to/dimmnet.lua capture.pcap
-- or copy this file to ~/.local/lib/wireshark/plugins/. See docs/wire.md,
-- "Capturing and decoding".
-- Frames the udp link carries (each datagram one whole Ethernet frame, on
-- no fixed port) are found by a heuristic on UDP payloads: a capture of
-- the link's traffic (tcpdump -i lo udp) decodes with no "Decode As".
-- Display filters use the abbreviations below, e.g.
--        dimmnet.type == 2 && dimmnet.flags.last == 1
--        dimmnet.nack_code == 256         (SEQ_ERR)
--        dimmnet.checksum.status == 0     (bad CRC32C)

local dimmnet = Proto("dimmnet", "dimmnet RDMA")

-- BEGIN GENERATED tables by go generate ./vdev/wire from package wire; do not edit
local HEADER_LEN = 64
local VERSION = 1
local ETHERTYPE = 0x88B5
local ETH_HEADER_LEN = 14
local AUTH_TRAILER_LEN = 24

-- Packet types (wire.TypeDocs): names by value, values by name.
local types = {
    [1] = "PUSH",
    [2] = "IPUSH",
    [3] = "PULLREQ",
    [4] = "PULLRESP",
    [5] = "ACK",
    [6] = "NACK",
    [7] = "PAGE",
    [8] = "HELLO",
    [9] = "FADD8",
    [10] = "CAS8",
    [11] = "PUSHB",
}
local TYPE = {
    PUSH = 1,
    IPUSH = 2,
    PULLREQ = 3,
    PULLRESP = 4,
    ACK = 5,
    NACK = 6,
    PAGE = 7,
    HELLO = 8,
    FADD8 = 9,
    CAS8 = 10,
    PUSHB = 11,
}

-- Flag bits (wire.FlagDocs), lowest first, and masks by name.
local flagbits = {
    { key = "flags.pkt_status", name = "PktStatus", mask = 0x0001 },
    { key = "flags.last", name = "Last", mask = 0x0002 },
    { key = "flags.first", name = "First", mask = 0x0004 },
    { key = "flags.direct_amt", name = "DirectAMT", mask = 0x0008 },
    { key = "flags.crc", name = "CRC", mask = 0x0010 },
    { key = "flags.hold", name = "Hold", mask = 0x0020 },
    { key = "flags.ack_valid", name = "AckValid", mask = 0x0040 },
    { key = "flags.signal", name = "Signal", mask = 0x0080 },
    { key = "flags.seq", name = "Seq", mask = 0x0100 },
    { key = "flags.tagged", name = "Tagged", mask = 0x0200 },
    { key = "flags.unordered", name = "Unordered", mask = 0x0400 },
    { key = "flags.sack", name = "Sack", mask = 0x0800 },
    { key = "flags.refused", name = "Refused", mask = 0x1000 },
    { key = "flags.auth", name = "Auth", mask = 0x2000 },
}
local FLAG = {
    PktStatus = 0x0001,
    Last = 0x0002,
    First = 0x0004,
    DirectAMT = 0x0008,
    CRC = 0x0010,
    Hold = 0x0020,
    AckValid = 0x0040,
    Signal = 0x0080,
    Seq = 0x0100,
    Tagged = 0x0200,
    Unordered = 0x0400,
    Sack = 0x0800,
    Refused = 0x1000,
    Auth = 0x2000,
}

-- NACK codes (wire.NackDocs; refusals named after uapi's errors).
local NACK = {
    RETRY = 0,
    SEQ_ERR = 256,
}
local NACK_REFUSAL_MAX = 255
local nack_names = {
    [0] = "RETRY",
    [1] = "BAD_OPCODE",
    [2] = "BAD_FLAGS",
    [3] = "BAD_LENGTH",
    [4] = "BAD_ALIGN",
    [5] = "BAD_ADDR",
    [6] = "REMOTE_ADDR",
    [7] = "NO_AMT_ENTRY",
    [8] = "BAD_AMT",
    [9] = "BAD_NODE",
    [10] = "UNREACHABLE",
    [11] = "BAD_HEAD",
    [12] = "TOO_BIG",
    [13] = "BAD_TAG",
    [14] = "HOLD_LIMIT",
    [256] = "SEQ_ERR",
}
for c = 1, NACK_REFUSAL_MAX do
    nack_names[c] = nack_names[c] or string.format("REFUSED(%d)", c)
end

-- Header fields (wire.Fields) in wire order; F[key] finds one.
local fields = {
    { key = "version", off = 0, size = 1 },
    { key = "type", off = 1, size = 1 },
    { key = "flags", off = 2, size = 2 },
    { key = "src_node", off = 4, size = 2 },
    { key = "dst_node", off = 6, size = 2 },
    { key = "src_proc", off = 8, size = 4 },
    { key = "dst_proc", off = 12, size = 4 },
    { key = "seq", off = 16, size = 4 },
    { key = "ack", off = 20, size = 4 },
    { key = "msg_id", off = 24, size = 4 },
    { key = "offset", off = 28, size = 4 },
    { key = "msg_len", off = 32, size = 4 },
    { key = "payload_len", off = 36, size = 4 },
    { key = "addr", off = 40, size = 8 },
    { key = "imm", off = 48, size = 8 },
    { key = "code", off = 56, size = 2 },
    { key = "tag", off = 58, size = 2 },
    { key = "checksum", off = 60, size = 4 },
}
local F = {}
for _, fd in ipairs(fields) do F[fd.key] = fd end

-- PUSHB sub-header fields (wire.SubFields) in wire order; SF[key] finds one.
local SUB_LEN = 32
local MAX_SUBS = 64
local subfields = {
    { key = "addr", off = 0, size = 8 },
    { key = "imm", off = 8, size = 8 },
    { key = "msg_id", off = 16, size = 4 },
    { key = "len", off = 20, size = 4 },
    { key = "src_proc", off = 24, size = 4 },
    { key = "flags", off = 28, size = 2 },
    { key = "reserved", off = 30, size = 2 },
}
local SF = {}
for _, fd in ipairs(subfields) do SF[fd.key] = fd end

-- Protocol fields: the header fields, one boolean per flag bit, and
-- what the dissector derives. pf[key] finds one.
local pf, pflist = {}, {}
local function field(key, p)
    pf[key] = p
    pflist[#pflist + 1] = p
end
field("version", ProtoField.uint8("dimmnet.version", "Version", base.DEC, nil, nil, "must be 1 (Version1); other versions are rejected, since their field offsets may differ"))
field("type", ProtoField.uint8("dimmnet.type", "Type", base.DEC, types, nil, "packet type (see Packet types); others are rejected"))
field("flags", ProtoField.uint16("dimmnet.flags", "Flags", base.HEX, nil, nil, "flag bits (see Flags); undefined bits are sent as 0 and carried through unchanged"))
field("src_node", ProtoField.uint16("dimmnet.src_node", "Source node", base.DEC, nil, nil, "sending node number"))
field("dst_node", ProtoField.uint16("dimmnet.dst_node", "Destination node", base.DEC, nil, nil, "target node number"))
field("src_proc", ProtoField.uint32("dimmnet.src_proc", "Source process", base.DEC, nil, nil, "global process id of the sender"))
field("dst_proc", ProtoField.uint32("dimmnet.dst_proc", "Destination process", base.DEC, nil, nil, "global process id of the target; with flag DirectAMT an AMT entry index"))
field("seq", ProtoField.uint32("dimmnet.seq", "Sequence number", base.DEC, nil, nil, "with flag Seq: the packet's per-peer sequence number, 1 for the first packet of a sending session, wrapping from 2^32-1 to 0; without it (ACK, NACK): a reference to the held, refused or expected packet, never acknowledged itself"))
field("ack", ProtoField.uint32("dimmnet.ack", "Cumulative ack", base.DEC, nil, nil, "with flag AckValid: every sequence number up to Ack was received in order (compared modulo 2^32: the 2^31 numbers before Ack)"))
field("msg_id", ProtoField.uint32("dimmnet.msg_id", "Message id", base.DEC, nil, nil, "identifies the packet's message among the sender's"))
field("offset", ProtoField.uint32("dimmnet.offset", "Offset in message", base.DEC, nil, nil, "byte offset of this packet's payload within its message"))
field("msg_len", ProtoField.uint32("dimmnet.msg_len", "Message length", base.DEC, nil, nil, "total message length in bytes (PULLREQ: the bytes asked for)"))
field("payload_len", ProtoField.uint32("dimmnet.payload_len", "Payload length", base.DEC, nil, nil, "payload bytes after the header; a frame holding fewer is rejected"))
field("addr", ProtoField.uint64("dimmnet.addr", "Address", base.HEX, nil, nil, "PUSH, PULLRESP: link-memory address of the payload's first byte; PULLREQ: the address to read; PAGE: the receiver's link page frame; NACK SEQ_ERR: the highest sequence number received"))
field("imm", ProtoField.uint64("dimmnet.imm", "Immediate", base.HEX, nil, nil, "PULLREQ: the requester's address the data returns to; PAGE: the LMMC port; with flag Sack: the selective-ack bitmap; PUSH, IPUSH: an operand delivered in the receive status"))
field("code", ProtoField.uint16("dimmnet.code", "Code", base.DEC, nil, nil, "HELLO: the handshake step; NACK: why (see NACK codes); with flag Seq: the sender's session epoch, whose change restarts the expected sequence number at 1; ACK with flag Refused: the epoch of the session whose packet Seq was refused; otherwise 0"))
field("tag", ProtoField.uint16("dimmnet.tag", "Tag", base.DEC, nil, nil, "with flag Tagged: the LMMC port whose link page frames a PUSH must land in (such a PUSH carries no Ack); otherwise, once the sender has received a packet of the receiver's sending session: that session's epoch (the Code of its packets), which Ack, and a NACK's or Hold ACK's Seq, Addr and Imm, refer to; the receiver ignores them when it is not its current session's, since a new session numbers from 1 again; otherwise 0"))
field("checksum", ProtoField.uint32("dimmnet.checksum", "Checksum", base.HEX, nil, nil, "with flag CRC: CRC32C of the header (this field as zero) and the payload; otherwise meaningless"))
field("sub.addr", ProtoField.uint64("dimmnet.sub.addr", "Address", base.HEX, nil, nil, "link-memory address of the message's first byte at the receiver"))
field("sub.imm", ProtoField.uint64("dimmnet.sub.imm", "Immediate", base.HEX, nil, nil, "an operand delivered in the receive status"))
field("sub.msg_id", ProtoField.uint32("dimmnet.sub.msg_id", "Message id", base.DEC, nil, nil, "identifies the message among the sender's"))
field("sub.len", ProtoField.uint32("dimmnet.sub.len", "Length", base.DEC, nil, nil, "the message's bytes, which follow the sub-header (padded to a multiple of 8); at least 1"))
field("sub.src_proc", ProtoField.uint32("dimmnet.sub.src_proc", "Source process", base.DEC, nil, nil, "global process id of the sender"))
field("sub.flags", ProtoField.uint16("dimmnet.sub.flags", "Flags", base.HEX, nil, nil, "only Signal (the sender wants a completion for this message); others make the frame malformed"))
field("sub.reserved", ProtoField.uint16("dimmnet.sub.reserved", "Reserved", base.HEX, nil, nil, "0; another value makes the frame malformed"))
field("flags.pkt_status", ProtoField.bool("dimmnet.flags.pkt_status", "PktStatus", 16, nil, 0x0001, "per-packet receive status requested"))
field("flags.last", ProtoField.bool("dimmnet.flags.last", "Last", 16, nil, 0x0002, "last packet of the message"))
field("flags.first", ProtoField.bool("dimmnet.flags.first", "First", 16, nil, 0x0004, "first packet of the message"))
field("flags.direct_amt", ProtoField.bool("dimmnet.flags.direct_amt", "DirectAMT", 16, nil, 0x0008, "DstProc is an AMT entry index (the IPUSH variant without the AMT Address Table)"))
field("flags.crc", ProtoField.bool("dimmnet.flags.crc", "CRC", 16, nil, 0x0010, "Checksum is valid and must be verified"))
field("flags.hold", ProtoField.bool("dimmnet.flags.hold", "Hold", 16, nil, 0x0020, "ACK: the receiver holds packet Seq (it is not lost); NACK RETRY: the hold has ended, send everything from Seq now"))
field("flags.ack_valid", ProtoField.bool("dimmnet.flags.ack_valid", "AckValid", 16, nil, 0x0040, "Ack carries a cumulative ack of the receiver's session Tag (any packet but a Tagged PUSH can piggyback one)"))
field("flags.signal", ProtoField.bool("dimmnet.flags.signal", "Signal", 16, nil, 0x0080, "the sender wants a completion for this message"))
field("flags.seq", ProtoField.bool("dimmnet.flags.seq", "Seq", 16, nil, 0x0100, "Seq is a sequence number to check (every data packet); without it (ACK, NACK) Seq is only a reference"))
field("flags.tagged", ProtoField.bool("dimmnet.flags.tagged", "Tagged", 16, nil, 0x0200, "PUSH: Tag names the LMMC port whose link page frames the data must land in; the receiver refuses it elsewhere (BAD_TAG)"))
field("flags.unordered", ProtoField.bool("dimmnet.flags.unordered", "Unordered", 16, nil, 0x0400, "the receiver may place this packet before the packets ahead of it in sequence have arrived (selective repeat)"))
field("flags.sack", ProtoField.bool("dimmnet.flags.sack", "Sack", 16, nil, 0x0800, "ACK, NACK: Imm is a selective-ack bitmap: bit i set means sequence number Ack+2+i was received and placed (Ack+1 is missing)"))
field("flags.refused", ProtoField.bool("dimmnet.flags.refused", "Refused", 16, nil, 0x1000, "ACK: the sender of this ACK has taken the refusal NACK of its packet Seq, of its session Code; the receiver stops repeating that refusal and holding its cumulative ACK below it"))
field("flags.auth", ProtoField.bool("dimmnet.flags.auth", "Auth", 16, nil, 0x2000, "keyed links: AuthTrailerLen (24) bytes follow the payload: a frame counter and an authentication tag over the whole frame (see Authenticated links)"))
field("nack_code", ProtoField.uint16("dimmnet.nack_code", "NACK code", base.DEC, nack_names, nil, "NACK: Code by name (as in the NACK code table); lets a filter such as dimmnet.nack_code == 256 pick NACKs only"))
field("sack.seq", ProtoField.uint32("dimmnet.sack.seq", "Selectively acked", base.DEC, nil, nil, "with flag Sack: one per sequence number the bitmap in Imm reports received (Ack+2+i for bit i)"))
field("checksum.status", ProtoField.uint8("dimmnet.checksum.status", "Checksum status", base.DEC, { [0] = "Bad", [1] = "Good", [2] = "Unverified" }, nil, "generated: 1 good, 0 bad (CRC32C recomputed by the dissector; also an expert error and [BAD CRC] in the summary), 2 not verified (flag CRC clear or payload cut by the capture)"))
field("payload", ProtoField.bytes("dimmnet.payload", "Payload", base.NONE, "the PayloadLen payload bytes"))
field("sub", ProtoField.uint8("dimmnet.sub", "Sub-message", base.DEC, nil, nil, "PUSHB: one per sub-message whose framing parses (as a receiver checks it), numbered from 0 (the bit of a refusal NACK's Imm that names it)"))
field("sub.data", ProtoField.bytes("dimmnet.sub.data", "Data", base.NONE, "PUSHB: a sub-message's Len bytes"))
field("auth.counter", ProtoField.uint64("dimmnet.auth.counter", "Frame counter", base.DEC, nil, nil, "with flag Auth: the trailer's frame counter, the nonce of the tag under the session's key; a receiver takes each counter once"))
field("auth.tag", ProtoField.bytes("dimmnet.auth.tag", "Authentication tag", base.NONE, "with flag Auth: AES-GMAC (HELLO: HMAC-SHA256, first 16 bytes) over the frame and the counter; the dissector cannot check it without the key"))
-- END GENERATED tables

dimmnet.fields = pflist

local ef_truncated = ProtoExpert.new("dimmnet.truncated", "Frame ends inside the dimmnet header", expert.group.MALFORMED, expert.severity.ERROR)
local ef_version   = ProtoExpert.new("dimmnet.bad_version", "Unsupported dimmnet version", expert.group.MALFORMED, expert.severity.ERROR)
local ef_type      = ProtoExpert.new("dimmnet.bad_type", "Unknown dimmnet packet type", expert.group.MALFORMED, expert.severity.ERROR)
local ef_short     = ProtoExpert.new("dimmnet.short", "PayloadLen exceeds the frame", expert.group.MALFORMED, expert.severity.ERROR)
local ef_checksum  = ProtoExpert.new("dimmnet.bad_checksum", "CRC32C mismatch", expert.group.CHECKSUM, expert.severity.ERROR)
dimmnet.experts = { ef_truncated, ef_version, ef_type, ef_short, ef_checksum }

local bit = bit32 or bit
local band, bor, bxor, bnot, lshift, rshift = bit.band, bit.bor, bit.bxor, bit.bnot, bit.lshift, bit.rshift

-- CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as in Go's
-- crc32.MakeTable(crc32.Castagnoli).
local crctab = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
    end
    crctab[i] = c
end
local function crc32c_update(crc, bytes)
    for i = 0, bytes:len() - 1 do
        crc = bxor(rshift(crc, 8), crctab[band(bxor(crc, bytes:get_index(i)), 0xff)])
    end
    return crc
end

local known_flags = 0
for _, b in ipairs(flagbits) do known_flags = bor(known_flags, b.mask) end

-- flag_string names the set flags as Go's Flags.String does.
local function flag_string(flags)
    if flags == 0 then return "0" end
    local names = {}
    for _, b in ipairs(flagbits) do
        if band(flags, b.mask) ~= 0 then names[#names + 1] = b.name end
    end
    local rest = band(flags, bnot(known_flags))
    if rest ~= 0 then names[#names + 1] = string.format("0x%x", rest) end
    return table.concat(names, "|")
end

local function nack_name(code)
    return nack_names[code] or string.format("NACK(0x%x)", code)
end

-- sack_seqs lists the sequence numbers a SACK bitmap reports received:
-- bit i stands for ack+2+i (ack+1 is the missing one).
local function sack_seqs(ack, bitmap)
    local seqs = {}
    for half, word in ipairs({ bitmap:lower(), bitmap:higher() }) do
        for i = 0, 31 do
            if band(word, lshift(1, i)) ~= 0 then
                seqs[#seqs + 1] = (ack + 2 + 32 * (half - 1) + i) % 4294967296
            end
        end
    end
    return seqs
end

-- runs renders sequence numbers as "12, 14-16" (with sep ", ").
local function runs(seqs, sep)
    local parts, i = {}, 1
    while i <= #seqs do
        local j = i
        while j < #seqs and seqs[j + 1] == (seqs[j] + 1) % 4294967296 do j = j + 1 end
        parts[#parts + 1] = (j == i) and tostring(seqs[i]) or (seqs[i] .. "-" .. seqs[j])
        i = j + 1
    end
    return table.concat(parts, sep)
end

-- dissect_subs shows a PUSHB payload's sub-messages when their framing
-- parses as a receiver checks it (wire.CheckBatch) and returns how many;
-- nil when it does not (the device counts such a frame malformed).
local function dissect_subs(tvb, t, v)
    local off, stop = HEADER_LEN, HEADER_LEN + v.payload_len
    if v.msg_len < 1 or v.msg_len > MAX_SUBS or v.offset ~= 0 then return nil end
    -- the header's own fields unused, First and Last set, no flag that
    -- changes a PUSH's meaning
    if v.addr:tonumber() ~= 0 or v.imm:tonumber() ~= 0 or v.msg_id ~= 0 or v.dst_proc ~= 0 then return nil end
    local whole = bor(FLAG.First, FLAG.Last)
    if band(v.flags, whole) ~= whole then return nil end
    if band(v.flags, bor(FLAG.PktStatus, FLAG.DirectAMT, FLAG.Tagged, FLAG.Unordered)) ~= 0 then return nil end
    local spans = {}
    for i = 1, v.msg_len do
        if off + SUB_LEN > stop then return nil end
        local n = tvb(off + SF.len.off, SF.len.size):le_uint()
        local fl = tvb(off + SF.flags.off, SF.flags.size):le_uint()
        local rsv = tvb(off + SF.reserved.off, SF.reserved.size):le_uint()
        if n == 0 or band(fl, bnot(FLAG.Signal)) ~= 0 or rsv ~= 0 or n > stop - off - SUB_LEN then return nil end
        local size = SUB_LEN + n + (8 - n % 8) % 8
        if off + size > stop then return nil end
        spans[i] = { off = off, n = n, size = size }
        off = off + size
    end
    if off ~= stop then return nil end
    for i, sp in ipairs(spans) do
        local st = t:add(pf.sub, tvb(sp.off, sp.size), i - 1)
        for _, fd in ipairs(subfields) do st:add_le(pf["sub." .. fd.key], tvb(sp.off + fd.off, fd.size)) end
        st:add(pf["sub.data"], tvb(sp.off + SUB_LEN, sp.n))
    end
    return #spans
end

local function value(tvb, fd)
    local r = tvb(fd.off, fd.size)
    if fd.size == 8 then return r:le_uint64() end
    return r:le_uint()
end

function dimmnet.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "DIMMNET"
    local caplen, wirelen = tvb:len(), tvb:reported_len()
    if caplen < HEADER_LEN then
        local t = caplen > 0 and tree:add(dimmnet, tvb(0, caplen)) or tree:add(dimmnet)
        if wirelen < HEADER_LEN then
            t:add_proto_expert_info(ef_truncated)
            pinfo.cols.info = string.format("truncated header: %d of %d bytes", wirelen, HEADER_LEN)
        else
            t:append_text(" [header cut by the capture's snapshot length]")
            pinfo.cols.info = "header cut by the capture"
        end
        return caplen
    end

    local v = {}
    for _, fd in ipairs(fields) do v[fd.key] = value(tvb, fd) end
    local plen = v.payload_len
    local shown = math.min(plen, caplen - HEADER_LEN)
    local t = tree:add(dimmnet, tvb(0, HEADER_LEN + shown))
    local it = {}
    for _, fd in ipairs(fields) do it[fd.key] = t:add_le(pf[fd.key], tvb(fd.off, fd.size)) end
    local function has(name) return band(v.flags, FLAG[name]) ~= 0 end

    if v.version ~= VERSION then it.version:add_proto_expert_info(ef_version) end
    if not types[v.type] then it.type:add_proto_expert_info(ef_type) end

    local fstr = flag_string(v.flags)
    it.flags:append_text(" (" .. (v.flags == 0 and "none" or fstr) .. ")")
    for _, b in ipairs(flagbits) do
        it.flags:add_le(pf[b.key], tvb(F.flags.off, F.flags.size))
    end
    if not has("Seq") then it.seq:append_text(" (reference)") end
    if not has("AckValid") then it.ack:append_text(" (not valid)") end

    local info = {}
    if v.type == TYPE.NACK then
        it.code:append_text(" (" .. nack_name(v.code) .. ")")
        it.code:add_le(pf.nack_code, tvb(F.code.off, F.code.size))
        info[#info + 1] = "code=" .. nack_name(v.code)
        if v.code == NACK.SEQ_ERR then it.addr:append_text(" (highest sequence number received)") end
    elseif has("Seq") then
        it.code:append_text(" (session epoch)")
    end
    if has("Sack") then
        local seqs = sack_seqs(v.ack, v.imm)
        it.imm:append_text(" (SACK: " .. (#seqs > 0 and runs(seqs, ", ") or "none") .. ")")
        for _, seq in ipairs(seqs) do
            it.imm:add(pf["sack.seq"], tvb(F.imm.off, F.imm.size), seq):set_generated()
        end
        info[#info + 1] = "sack=" .. (#seqs > 0 and runs(seqs, ",") or "none")
    end
    if has("Tagged") then
        it.tag:append_text(" (LMMC port)")
        info[#info + 1] = "tag=" .. v.tag
    end
    if v.type == TYPE.PAGE then
        it.addr:append_text(" (link page frame)")
        it.imm:append_text(" (LMMC port)")
        info[#info + 1] = "port=" .. tostring(v.imm) .. " frame=0x" .. (v.addr:tohex():gsub("^0+(.)", "%1"))
    elseif v.type == TYPE.PULLREQ then
        it.imm:append_text(" (requester's address)")
    end

    local co, cs = F.checksum.off, F.checksum.size
    local status = 2
    if plen > wirelen - HEADER_LEN then
        it.payload_len:add_proto_expert_info(ef_short)
    elseif plen > caplen - HEADER_LEN then
        it.payload_len:append_text(" [payload cut by the capture's snapshot length]")
    elseif has("CRC") then
        -- The header with the checksum field as zero, then the payload.
        local crc = crc32c_update(0xFFFFFFFF, tvb(0, co):bytes())
        crc = crc32c_update(crc, ByteArray.new(string.rep("00", cs)))
        if co + cs < HEADER_LEN then crc = crc32c_update(crc, tvb(co + cs, HEADER_LEN - co - cs):bytes()) end
        if plen > 0 then crc = crc32c_update(crc, tvb(HEADER_LEN, plen):bytes()) end
        crc = bxor(crc, 0xFFFFFFFF)
        if crc == v.checksum then
            status = 1
        else
            status = 0
            it.checksum:append_text(string.format(" [incorrect, should be 0x%08x]", crc))
            it.checksum:add_proto_expert_info(ef_checksum)
        end
    end
    t:add(pf["checksum.status"], tvb(co, cs), status):set_generated()
    if shown > 0 then
        t:add(pf.payload, tvb(HEADER_LEN, shown))
    end
    if v.type == TYPE.PUSHB and shown == plen then
        local n = dissect_subs(tvb, t, v)
        if n then
            info[#info + 1] = "subs=" .. n
        else
            t:append_text(" [PUSHB sub-messages do not parse]")
        end
    end
    local consumed = HEADER_LEN + shown
    if has("Auth") and shown == plen and caplen >= HEADER_LEN + plen + AUTH_TRAILER_LEN then
        t:add_le(pf["auth.counter"], tvb(HEADER_LEN + plen, 8))
        t:add(pf["auth.tag"], tvb(HEADER_LEN + plen + 8, AUTH_TRAILER_LEN - 8))
        consumed = consumed + AUTH_TRAILER_LEN
    end

    local s = string.format("%s %d>%d seq=%d", types[v.type] or string.format("Type(%d)", v.type),
        v.src_node, v.dst_node, v.seq)
    if has("AckValid") then s = s .. " ack=" .. v.ack end
    if #info > 0 then s = s .. " " .. table.concat(info, " ") end
    s = s .. string.format(" msg=%d off=%d/%d len=%d", v.msg_id, v.offset, v.msg_len, plen)
    if v.flags ~= 0 then s = s .. " [" .. fstr .. "]" end
    if status == 0 then s = s .. " [BAD CRC]" end
    pinfo.cols.info = s
    return consumed
end

DissectorTable.get("ethertype"):add(ETHERTYPE, dimmnet)

-- The udp link sends each frame, Ethernet header included, as one UDP
-- datagram on whatever ports its peers file names, so no port table can
-- find it: a heuristic does. A UDP payload is a dimmnet frame when it
-- holds an Ethernet header with EtherType 0x88B5 at offset 12, then a
-- whole dimmnet header of a known version and type whose payload fits in
-- the datagram (a keyed link's authentication trailer follows it). The
-- Ethernet dissector then takes it, and the EtherType brings it here.
local eth = Dissector.get("eth_withoutfcs")

local function heuristic_udp(tvb, pinfo, tree)
    local n = tvb:len()
    if n < ETH_HEADER_LEN + HEADER_LEN or tvb(12, 2):uint() ~= ETHERTYPE then return false end
    local h = ETH_HEADER_LEN
    if tvb(h + F.version.off, 1):uint() ~= VERSION or not types[tvb(h + F.type.off, 1):uint()] then return false end
    local plen = tvb(h + F.payload_len.off, F.payload_len.size):le_uint()
    if h + HEADER_LEN + plen > tvb:reported_len() then return false end
    eth:call(tvb, pinfo, tree)
    return true
end

dimmnet:register_heuristic("udp", heuristic_udp)
