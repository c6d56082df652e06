// OrderedDict: name -> value in insertion order, with lookup by name.
// named_parameters(), state_dict() and ModuleDict use it.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensor/Error.h"

namespace loom {
namespace nn {

template <typename V>
class OrderedDict {
 public:
  using Item = std::pair<std::string, V>;

  // Inserts or replaces `key`, keeping the original position on replace.
  V& insert(const std::string& key, V value) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      items_[it->second].second = std::move(value);
      return items_[it->second].second;
    }
    index_[key] = items_.size();
    items_.emplace_back(key, std::move(value));
    return items_.back().second;
  }
  bool contains(const std::string& key) const { return index_.count(key) > 0; }
  // Throws loom::Error naming the key when absent.
  V& at(const std::string& key) {
    auto it = index_.find(key);
    LOOM_CHECK(it != index_.end(), "OrderedDict: no key \"", key, "\"");
    return items_[it->second].second;
  }
  const V& at(const std::string& key) const { return const_cast<OrderedDict*>(this)->at(key); }
  V* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const V* find(const std::string& key) const { return const_cast<OrderedDict*>(this)->find(key); }
  // Removes `key` if present (order of the rest is kept).
  void erase(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    items_.erase(items_.begin() + it->second);
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_[items_[i].first] = i;
  }
  void clear() {
    items_.clear();
    index_.clear();
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const auto& item : items_) k.push_back(item.first);
    return k;
  }
  std::vector<V> values() const {
    std::vector<V> v;
    for (const auto& item : items_) v.push_back(item.second);
    return v;
  }
  const std::vector<Item>& items() const { return items_; }
  typename std::vector<Item>::iterator begin() { return items_.begin(); }
  typename std::vector<Item>::iterator end() { return items_.end(); }
  typename std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  typename std::vector<Item>::const_iterator end() const { return items_.end(); }
  Item& operator[](size_t i) { return items_[i]; }
  const Item& operator[](size_t i) const { return items_[i]; }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace nn
}  // namespace loom
