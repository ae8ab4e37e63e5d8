//! MLCommons Chakra execution traces (v1.0.0), the input ASTRA-sim reads: one file per
//! rank holding a `GlobalMetadata` message, then `Node` messages, each message preceded by
//! its length as a protobuf varint (Chakra's `protolib.encodeMessage`).
//!
//! The messages are derived with `prost` on structs that follow the schema
//! `src/formats/chakra_et_def.proto` field by field (names, numbers, types; proto3 packs
//! repeated numbers): no protobuf compiler is involved. One writer ([`write`]) and one
//! reader ([`read`]); what the nodes mean for a training job is `interop::chakra`'s.

use super::{write_atomic, FormatError};
use prost::Message;
use std::path::Path;

/// The schema version written into `GlobalMetadata` (Chakra 1.0.0's generator writes
/// `1.0.0`).
pub const SCHEMA_VERSION: &str = "1.0.0";

/// `AttributeProto`: a named value of one of the schema's types.
#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    /// Name (ASTRA-sim reads `is_cpu_op`, `num_ops`, `tensor_size`, `comm_type`,
    /// `comm_priority`, `comm_size`, `comm_src`, `comm_dst`, `comm_tag`, `pg_name`).
    #[prost(string, tag = "1")]
    pub name: String,
    /// Free text.
    #[prost(string, tag = "2")]
    pub doc_string: String,
    /// The value.
    #[prost(
        oneof = "attribute_proto::Value",
        tags = "3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32"
    )]
    pub value: Option<attribute_proto::Value>,
}

/// The `value` oneof of [`AttributeProto`].
pub mod attribute_proto {
    /// One value, of the type its field number says.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// `DoubleVal` (field 3).
        #[prost(double, tag = "3")]
        DoubleVal(f64),
        /// `DoubleList` (field 4).
        #[prost(message, tag = "4")]
        DoubleList(super::DoubleList),
        /// `FloatVal` (field 5).
        #[prost(float, tag = "5")]
        FloatVal(f32),
        /// `FloatList` (field 6).
        #[prost(message, tag = "6")]
        FloatList(super::FloatList),
        /// `Int32Val` (field 7).
        #[prost(int32, tag = "7")]
        Int32Val(i32),
        /// `Int32List` (field 8).
        #[prost(message, tag = "8")]
        Int32List(super::Int32List),
        /// `Int64Val` (field 9).
        #[prost(int64, tag = "9")]
        Int64Val(i64),
        /// `Int64List` (field 10).
        #[prost(message, tag = "10")]
        Int64List(super::Int64List),
        /// `Uint32Val` (field 11).
        #[prost(uint32, tag = "11")]
        Uint32Val(u32),
        /// `Uint32List` (field 12).
        #[prost(message, tag = "12")]
        Uint32List(super::Uint32List),
        /// `Uint64Val` (field 13).
        #[prost(uint64, tag = "13")]
        Uint64Val(u64),
        /// `Uint64List` (field 14).
        #[prost(message, tag = "14")]
        Uint64List(super::Uint64List),
        /// `Sint32Val` (field 15).
        #[prost(sint32, tag = "15")]
        Sint32Val(i32),
        /// `Sint32List` (field 16).
        #[prost(message, tag = "16")]
        Sint32List(super::Sint32List),
        /// `Sint64Val` (field 17).
        #[prost(sint64, tag = "17")]
        Sint64Val(i64),
        /// `Sint64List` (field 18).
        #[prost(message, tag = "18")]
        Sint64List(super::Sint64List),
        /// `Fixed32Val` (field 19).
        #[prost(fixed32, tag = "19")]
        Fixed32Val(u32),
        /// `Fixed32List` (field 20).
        #[prost(message, tag = "20")]
        Fixed32List(super::Fixed32List),
        /// `Fixed64Val` (field 21).
        #[prost(fixed64, tag = "21")]
        Fixed64Val(u64),
        /// `Fixed64List` (field 22).
        #[prost(message, tag = "22")]
        Fixed64List(super::Fixed64List),
        /// `Sfixed32Val` (field 23).
        #[prost(sfixed32, tag = "23")]
        Sfixed32Val(i32),
        /// `Sfixed32List` (field 24).
        #[prost(message, tag = "24")]
        Sfixed32List(super::Sfixed32List),
        /// `Sfixed64Val` (field 25).
        #[prost(sfixed64, tag = "25")]
        Sfixed64Val(i64),
        /// `Sfixed64List` (field 26).
        #[prost(message, tag = "26")]
        Sfixed64List(super::Sfixed64List),
        /// `BoolVal` (field 27).
        #[prost(bool, tag = "27")]
        BoolVal(bool),
        /// `BoolList` (field 28).
        #[prost(message, tag = "28")]
        BoolList(super::BoolList),
        /// `StringVal` (field 29).
        #[prost(string, tag = "29")]
        StringVal(String),
        /// `StringList` (field 30).
        #[prost(message, tag = "30")]
        StringList(super::StringList),
        /// `BytesVal` (field 31).
        #[prost(bytes = "vec", tag = "31")]
        BytesVal(Vec<u8>),
        /// `BytesList` (field 32).
        #[prost(message, tag = "32")]
        BytesList(super::BytesList),
    }
}

/// `DoubleList`.
#[derive(Clone, PartialEq, Message)]
pub struct DoubleList {
    /// Values.
    #[prost(double, repeated, tag = "1")]
    pub values: Vec<f64>,
}

/// `FloatList`.
#[derive(Clone, PartialEq, Message)]
pub struct FloatList {
    /// Values.
    #[prost(float, repeated, tag = "1")]
    pub values: Vec<f32>,
}

/// `Int32List`.
#[derive(Clone, PartialEq, Message)]
pub struct Int32List {
    /// Values.
    #[prost(int32, repeated, tag = "1")]
    pub values: Vec<i32>,
}

/// `Int64List`.
#[derive(Clone, PartialEq, Message)]
pub struct Int64List {
    /// Values.
    #[prost(int64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `Uint32List`.
#[derive(Clone, PartialEq, Message)]
pub struct Uint32List {
    /// Values.
    #[prost(uint32, repeated, tag = "1")]
    pub values: Vec<u32>,
}

/// `Uint64List`.
#[derive(Clone, PartialEq, Message)]
pub struct Uint64List {
    /// Values.
    #[prost(uint64, repeated, tag = "1")]
    pub values: Vec<u64>,
}

/// `Sint32List`.
#[derive(Clone, PartialEq, Message)]
pub struct Sint32List {
    /// Values.
    #[prost(sint32, repeated, tag = "1")]
    pub values: Vec<i32>,
}

/// `Sint64List`.
#[derive(Clone, PartialEq, Message)]
pub struct Sint64List {
    /// Values.
    #[prost(sint64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `Fixed32List`.
#[derive(Clone, PartialEq, Message)]
pub struct Fixed32List {
    /// Values.
    #[prost(fixed32, repeated, tag = "1")]
    pub values: Vec<u32>,
}

/// `Fixed64List`.
#[derive(Clone, PartialEq, Message)]
pub struct Fixed64List {
    /// Values.
    #[prost(fixed64, repeated, tag = "1")]
    pub values: Vec<u64>,
}

/// `Sfixed32List`.
#[derive(Clone, PartialEq, Message)]
pub struct Sfixed32List {
    /// Values.
    #[prost(sfixed32, repeated, tag = "1")]
    pub values: Vec<i32>,
}

/// `Sfixed64List`.
#[derive(Clone, PartialEq, Message)]
pub struct Sfixed64List {
    /// Values.
    #[prost(sfixed64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `BoolList`.
#[derive(Clone, PartialEq, Message)]
pub struct BoolList {
    /// Values.
    #[prost(bool, repeated, tag = "1")]
    pub values: Vec<bool>,
}

/// `StringList`.
#[derive(Clone, PartialEq, Message)]
pub struct StringList {
    /// Values.
    #[prost(string, repeated, tag = "1")]
    pub values: Vec<String>,
}

/// `BytesList`.
#[derive(Clone, PartialEq, Message)]
pub struct BytesList {
    /// Values.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub values: Vec<Vec<u8>>,
}

/// `GlobalMetadata`: the first message of every file.
#[derive(Clone, PartialEq, Message)]
pub struct GlobalMetadata {
    /// Schema version.
    #[prost(string, tag = "1")]
    pub version: String,
    /// Attributes.
    #[prost(message, repeated, tag = "2")]
    pub attr: Vec<AttributeProto>,
}

/// `NodeType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum NodeType {
    /// `INVALID_NODE`.
    InvalidNode = 0,
    /// `METADATA_NODE`.
    MetadataNode = 1,
    /// `MEM_LOAD_NODE`.
    MemLoadNode = 2,
    /// `MEM_STORE_NODE`.
    MemStoreNode = 3,
    /// `COMP_NODE`: computation for `duration_micros`.
    CompNode = 4,
    /// `COMM_SEND_NODE`.
    CommSendNode = 5,
    /// `COMM_RECV_NODE`.
    CommRecvNode = 6,
    /// `COMM_COLL_NODE`.
    CommCollNode = 7,
}

/// `CollectiveCommType`, the `comm_type` attribute of a collective node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CollectiveCommType {
    /// `ALL_REDUCE`.
    AllReduce = 0,
    /// `REDUCE`.
    Reduce = 1,
    /// `ALL_GATHER`.
    AllGather = 2,
    /// `GATHER`.
    Gather = 3,
    /// `SCATTER`.
    Scatter = 4,
    /// `BROADCAST`.
    Broadcast = 5,
    /// `ALL_TO_ALL`.
    AllToAll = 6,
    /// `REDUCE_SCATTER`.
    ReduceScatter = 7,
    /// `REDUCE_SCATTER_BLOCK`.
    ReduceScatterBlock = 8,
    /// `BARRIER`.
    Barrier = 9,
}

/// `IOInfo`.
#[derive(Clone, PartialEq, Message)]
pub struct IoInfo {
    /// Values.
    #[prost(string, tag = "1")]
    pub values: String,
    /// Shapes.
    #[prost(string, tag = "2")]
    pub shapes: String,
    /// Types.
    #[prost(string, tag = "3")]
    pub types: String,
}

/// `Tensor`.
#[derive(Clone, PartialEq, Message)]
pub struct Tensor {
    /// Tensor id.
    #[prost(uint64, tag = "1")]
    pub tensor_id: u64,
    /// Storage id.
    #[prost(uint64, tag = "2")]
    pub storage_id: u64,
    /// Offset into the storage.
    #[prost(uint64, tag = "3")]
    pub offset: u64,
    /// Elements.
    #[prost(uint64, tag = "4")]
    pub num_elem: u64,
    /// Bytes per element.
    #[prost(uint64, tag = "5")]
    pub elem_bytes: u64,
    /// Device.
    #[prost(string, tag = "6")]
    pub device: String,
}

/// `Node`: one operation of a rank.
#[derive(Clone, PartialEq, Message)]
pub struct Node {
    /// Id, unique in the file.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// [`NodeType`].
    #[prost(enumeration = "NodeType", tag = "3")]
    pub r#type: i32,
    /// Control dependencies (node ids).
    #[prost(uint64, repeated, tag = "4")]
    pub ctrl_deps: Vec<u64>,
    /// Data dependencies (node ids).
    #[prost(uint64, repeated, tag = "5")]
    pub data_deps: Vec<u64>,
    /// Start time, µs.
    #[prost(uint64, tag = "6")]
    pub start_time_micros: u64,
    /// Duration, µs (a compute node's run time).
    #[prost(uint64, tag = "7")]
    pub duration_micros: u64,
    /// Inputs.
    #[prost(message, optional, tag = "8")]
    pub inputs: Option<IoInfo>,
    /// Outputs.
    #[prost(message, optional, tag = "9")]
    pub outputs: Option<IoInfo>,
    /// Attributes.
    #[prost(message, repeated, tag = "10")]
    pub attr: Vec<AttributeProto>,
}

impl AttributeProto {
    /// A named attribute.
    pub fn new(name: &str, value: attribute_proto::Value) -> Self {
        AttributeProto {
            name: name.to_string(),
            doc_string: String::new(),
            value: Some(value),
        }
    }
}

impl Node {
    /// The attribute `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&attribute_proto::Value> {
        self.attr
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.value.as_ref())
    }
}

/// Writes one rank's trace: `meta`, then `nodes`, each length-delimited.
pub fn write(path: &Path, meta: &GlobalMetadata, nodes: &[Node]) -> Result<(), FormatError> {
    write_atomic(path, |w| {
        w.write_all(&meta.encode_length_delimited_to_vec())?;
        for n in nodes {
            w.write_all(&n.encode_length_delimited_to_vec())?;
        }
        Ok(())
    })
}

/// Reads one rank's trace. Errors name the file and the message (1 = the metadata, 2 =
/// the first node, …) where decoding failed; a length prefix beyond the file's end is an
/// error, never an allocation.
pub fn read(path: &Path) -> Result<(GlobalMetadata, Vec<Node>), FormatError> {
    let bytes = std::fs::read(path).map_err(FormatError::io(path))?;
    parse(path, &bytes)
}

/// [`read`] on bytes already in memory (`path` names them in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<(GlobalMetadata, Vec<Node>), FormatError> {
    let mut buf = bytes;
    let bad = |no: u64, what: &str, e: prost::DecodeError| {
        FormatError::syntax(
            path,
            no,
            what,
            format!("not a length-delimited Chakra {what} message: {e}"),
        )
    };
    if buf.is_empty() {
        return Err(FormatError::file(
            path,
            "empty: a Chakra trace starts with its GlobalMetadata message",
        ));
    }
    let meta = GlobalMetadata::decode_length_delimited(&mut buf)
        .map_err(|e| bad(1, "GlobalMetadata", e))?;
    let mut nodes = Vec::new();
    let mut no = 1;
    while !buf.is_empty() {
        no += 1;
        nodes.push(Node::decode_length_delimited(&mut buf).map_err(|e| bad(no, "Node", e))?);
    }
    Ok((meta, nodes))
}

#[cfg(test)]
mod tests {
    use super::attribute_proto::Value;
    use super::*;

    #[test]
    fn field_numbers_and_wire_types_follow_et_def_proto() {
        // Node{id: 1, name: "a", type: COMP_NODE, data_deps: [0], duration_micros: 5,
        // attr: [{name: "comm_size", int64_val: 300}]} by hand: field 1 varint 1; field 2
        // string "a"; field 3 varint 4; field 5 packed [0]; field 7 varint 5; field 10
        // message {field 1 "comm_size", field 9 varint 300}.
        let n = Node {
            id: 1,
            name: "a".into(),
            r#type: NodeType::CompNode as i32,
            data_deps: vec![0],
            duration_micros: 5,
            attr: vec![AttributeProto::new("comm_size", Value::Int64Val(300))],
            ..Node::default()
        };
        let want: Vec<u8> = [
            vec![
                0x08, 1, 0x12, 1, b'a', 0x18, 4, 0x2a, 1, 0, 0x38, 5, 0x52, 14, 0x0a, 9,
            ],
            b"comm_size".to_vec(),
            vec![0x48, 0xac, 0x02],
        ]
        .concat();
        assert_eq!(n.encode_to_vec(), want);
        let p = Path::new("t.et");
        let mut bytes = GlobalMetadata {
            version: "1.0.0".into(),
            attr: vec![],
        }
        .encode_length_delimited_to_vec();
        bytes.extend(n.encode_length_delimited_to_vec());
        let (m, nodes) = parse(p, &bytes).unwrap();
        assert_eq!((m.version.as_str(), nodes), ("1.0.0", vec![n]));
        // A length prefix past the end names the message.
        let e = parse(p, &bytes[..bytes.len() - 1]).unwrap_err().to_string();
        assert!(e.starts_with("t.et:2: Node:"), "{e}");
    }
}
